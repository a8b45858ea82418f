/**
 * Gemini's computer use in `computer_action` (`vocabulary: "gemini"`) on a real 1920x1080 Xvfb +
 * openbox: `functionCall`s built as `@google/genai`'s `FunctionCall` type declares them, their
 * points on the 0–999 grid landing where `floor(v × size / 1000)` says (read back with xdotool and a
 * GTK window's own event log), typing read back from a GTK entry, the browser functions on Debian's
 * Chromium with pages served on loopback, and a `safety_decision` put to a person who answers
 * through the console's `/live` socket.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { FunctionCall, FunctionResponse } from "@google/genai";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { systemChromium } from "../support/browser.js";
import {
  APPS,
  type DesktopServer,
  eventually,
  focusWindow,
  PYTHON,
  placeWindow,
  startDesktopServer,
} from "../support/desktop.js";

const PAGE = "<!doctype html><title>Gemini first</title><p>first page</p>";
const SECOND = "<!doctype html><title>Gemini second</title><p>second page</p>";

let desk: DesktopServer;
let site: Server;
let base: string;
/** Where the button window is, in grid units (its centre). */
let buttonGrid: { x: number; y: number };
/** Where the entry window is, in grid units. */
let entryGrid: { x: number; y: number };
let entryId: number;
/** The log window of clicks.py (presses, releases and wheel notches, in window coordinates). */
let logBox: { x: number; y: number; width: number; height: number };

const toGrid = (v: number, size: number) => Math.ceil((v * 1000) / size);

async function place(args: string[], title: string, x: number, y: number) {
  desk.spawn("env", ["GDK_CORE_DEVICE_EVENTS=1", PYTHON, ...args]);
  const id = await desk.waitForWindow(title);
  return { id, box: await placeWindow(desk, id, x, y) };
}

beforeAll(async () => {
  site = createServer((req, res) =>
    res.writeHead(200, { "content-type": "text/html" }).end(req.url === "/second" ? SECOND : PAGE),
  );
  await new Promise<void>((resolve) => site.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  desk = await startDesktopServer(
    { width: 1920, height: 1080 },
    {
      server: {
        // Read when the browser starts, by then `desk` is there.
        browser: {
          executablePath: systemChromium(),
          searchUrl: `${base}/search?q=%s`,
          env: () => desk.display.env,
        },
      },
    },
  );
  const button = await place(
    [join(APPS, "button.py"), join(desk.dir, "clicks.txt"), "geminibutton"],
    "geminibutton",
    100,
    100,
  );
  buttonGrid = {
    x: toGrid(button.box.x + button.box.width / 2, 1920),
    y: toGrid(button.box.y + button.box.height / 2, 1080),
  };
  const entry = await place(
    [join(APPS, "entry.py"), join(desk.dir, "entry.txt"), "geminientry"],
    "geminientry",
    100,
    400,
  );
  entryId = entry.id;
  // Near the entry's right end: a click there puts the caret after the text.
  entryGrid = { x: toGrid(entry.box.x + 450, 1920), y: toGrid(entry.box.y + entry.box.height / 2, 1080) };
  ({ box: logBox } = await place(
    [join(APPS, "clicks.py"), join(desk.dir, "log.txt"), "geminilog"],
    "geminilog",
    1000,
    500,
  ));
}, 90_000);
afterAll(async () => {
  await desk?.stop();
  site?.close();
});

async function gemini(action: FunctionCall | FunctionCall[], extra: Record<string, unknown> = {}) {
  const calls = Array.isArray(action) ? { actions: action } : { action };
  return desk.cmd("computer_action", { ...calls, vocabulary: "gemini", ...extra });
}
const clicks = () => desk.read("clicks.txt").split("\n").filter(Boolean).length;
const log = () => desk.read("log.txt").split("\n").filter(Boolean);

describe("computer_action with Gemini's computer use", () => {
  it("maps the 0–999 grid to the screen exactly: floor(v × size / 1000) on each axis", async () => {
    for (const [x, y, sx, sy] of [
      [0, 0, 0, 0],
      [999, 999, 1918, 1078],
      [500, 500, 960, 540],
      [123, 456, 236, 492],
      [1, 999, 1, 1078],
    ]) {
      const call: FunctionCall = { name: "hover_at", args: { x, y } };
      const event = await gemini(call, { screenshot: false });
      expect(event, `${x},${y}`).toMatchObject({ success: true, is_error: false });
      expect(await desk.pointer(), `${x},${y}`).toEqual({ x: sx, y: sy });
    }
  });

  it("answers a FunctionResponse with the screenshot as inline data, at the display size", async () => {
    const call: FunctionCall = { id: "fc_1", name: "click_at", args: { ...buttonGrid } };
    const event = await gemini(call, { display: "auto" });
    expect(event).toMatchObject({
      success: true,
      vocabulary: "gemini",
      is_error: false,
      display: { width: 1440, height: 810 },
    });
    const response: FunctionResponse = event.tool_result;
    expect(response).toMatchObject({ id: "fc_1", name: "click_at", response: {} });
    expect(response.parts).toHaveLength(1);
    expect(response.parts?.[0].inlineData?.mimeType).toBe("image/png");
    const meta = await sharp(Buffer.from(response.parts?.[0].inlineData?.data ?? "", "base64")).metadata();
    expect([meta.width, meta.height]).toEqual([1440, 810]);
    expect(await eventually(() => clicks() === 1)).toBe(true);
  });

  it("types at a point, clearing the field first and pressing Enter when asked", async () => {
    await focusWindow(desk, entryId);
    await desk.cmd("type_text", { text: "old text" });
    await eventually(() => desk.read("entry.txt") === "old text");
    const call: FunctionCall = {
      name: "type_text_at",
      args: { ...entryGrid, text: "gemini typed", press_enter: true, clear_before_typing: true },
    };
    const event = await gemini(call, { screenshot: false, verify: true, verify_ms: 5000 });
    expect(event).toMatchObject({ success: true, is_error: false, effect: "confirmed" });
    expect(event.tool_result.response.effect).toMatch(/^Effect: confirmed/);
    expect(await eventually(() => desk.read("entry.txt") === "gemini typed")).toBe(true);
    // Elsewhere past the text (the same point again so soon would be a double click, selecting a word).
    const keep: FunctionCall = {
      name: "type_text_at",
      args: { x: entryGrid.x + 10, y: entryGrid.y, text: "+", clear_before_typing: false },
    };
    await gemini(keep, { screenshot: false });
    expect(await eventually(() => desk.read("entry.txt") === "gemini typed+")).toBe(true);
  });

  it("presses a key combination: Control+A then typing replaces the entry's text", async () => {
    await focusWindow(desk, entryId);
    await gemini({ name: "key_combination", args: { keys: "Control+A" } }, { screenshot: false });
    await desk.cmd("type_text", { text: "replaced" });
    expect(await eventually(() => desk.read("entry.txt") === "replaced")).toBe(true);
  });

  it("scrolls at a point by a magnitude on the grid, and drags and drops", async () => {
    const inside = { x: toGrid(logBox.x + 200, 1920), y: toGrid(logBox.y + 150, 1080) };
    const before = log().length;
    // 800 grid units of the 1080 px height are 864 px: nine wheel notches.
    await gemini(
      { name: "scroll_at", args: { ...inside, direction: "down", magnitude: 800 } },
      { screenshot: false },
    );
    const notches = await eventually(() => {
      const lines = log().slice(before);
      return lines.length >= 9 ? lines : null;
    });
    expect(notches).toEqual(Array(9).fill("scroll down"));
    const start = log().length;
    const to = { x: toGrid(logBox.x + 300, 1920), y: toGrid(logBox.y + 250, 1080) };
    await gemini(
      { name: "drag_and_drop", args: { ...inside, destination_x: to.x, destination_y: to.y } },
      { screenshot: false },
    );
    const [press, release] = await eventually(() => {
      const lines = log().slice(start);
      return lines.length >= 2 ? lines : null;
    });
    const from = {
      x: Math.floor((inside.x * 1920) / 1000) - logBox.x,
      y: Math.floor((inside.y * 1080) / 1000) - logBox.y,
    };
    const end = {
      x: Math.floor((to.x * 1920) / 1000) - logBox.x,
      y: Math.floor((to.y * 1080) / 1000) - logBox.y,
    };
    expect(press).toBe(`press 1 ${from.x} ${from.y}`);
    expect(release).toBe(`release 1 ${end.x} ${end.y}`);
  });

  it("waits five seconds", async () => {
    const started = performance.now();
    const event = await gemini({ name: "wait_5_seconds", args: {} }, { screenshot: false });
    expect(event).toMatchObject({ success: true, is_error: false });
    expect(performance.now() - started).toBeGreaterThanOrEqual(4990);
  });

  it("refuses a function that is not Gemini's with invalid_params naming it, and runs nothing", async () => {
    const before = clicks();
    const event = await gemini([
      { name: "click_at", args: { ...buttonGrid } },
      { name: "open_the_pod_bay_doors", args: {} },
    ]);
    expect(event).toMatchObject({ success: false, code: "invalid_params" });
    expect(event.error).toMatch(
      /actions\[1\]: 'open_the_pod_bay_doors' is not one of Gemini's computer-use functions/,
    );
    await desk.cmd("wait", { ms: 300 });
    expect(clicks()).toBe(before);
  });

  it("answers the model's mistakes in the response's error, and stops a list at the first", async () => {
    const before = clicks();
    const outside = await gemini({ name: "click_at", args: { x: 1000, y: 10 } }, { screenshot: false });
    expect(outside).toMatchObject({ success: true, is_error: true });
    expect(outside.tool_result.response.error).toMatch(/^Invalid args of click_at: .*x/);
    const event = await gemini(
      [
        { name: "hover_at", args: { x: 900, y: 900 } },
        { name: "key_combination", args: { keys: "Control+" } },
        { name: "click_at", args: { ...buttonGrid } },
      ],
      { screenshot: false },
    );
    expect(event).toMatchObject({ success: true, is_error: true });
    const [hover, keys, click] = event.tool_results as FunctionResponse[];
    expect(hover.response?.error).toBeUndefined();
    expect(keys.response?.error).toBe('Invalid keys: "Control+" has an empty key.');
    expect(click).toMatchObject({
      name: "click_at",
      response: { error: "Not executed: an earlier computer action in this turn failed." },
    });
    await desk.cmd("wait", { ms: 300 });
    expect(clicks()).toBe(before);
  });
});

/**
 * A viewer of the console's live view, as the person who answers the first request for help: takes
 * control and hands it back with `note`. The returned function closes the socket (and waits).
 */
async function person(note: string): Promise<() => Promise<void>> {
  const ws = new WebSocket(`${desk.server.url.replace("http", "ws")}/live`);
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  let state: "waiting" | "taking" | "done" = "waiting";
  ws.on("message", (data, binary) => {
    if (binary) return;
    const frame = JSON.parse(String(data));
    if (state === "waiting" && frame.type === "control_state" && frame.help?.length > 0 && !frame.held) {
      state = "taking";
      ws.send(JSON.stringify({ type: "control", on: true }));
    } else if (state === "taking" && frame.type === "control" && frame.on === true) {
      state = "done";
      ws.send(JSON.stringify({ type: "control", on: false, note }));
    }
  });
  return async () => {
    const closed = new Promise((resolve) => ws.once("close", resolve));
    ws.close();
    await closed;
  };
}

describe("a safety_decision that asks for confirmation", () => {
  const confirmed = (): FunctionCall => ({
    name: "click_at",
    args: {
      ...buttonGrid,
      safety_decision: { decision: "require_confirmation", explanation: "The button may submit a form." },
    },
  });

  it("is put to a person; their yes runs the action and the response acknowledges it", async () => {
    const before = clicks();
    const leave = await person("yes, go ahead");
    try {
      const event = await gemini(confirmed(), { screenshot: false, confirm_timeout: 60 });
      expect(event).toMatchObject({ success: true, is_error: false });
      expect(event.tool_result.response).toMatchObject({
        safety_acknowledgement: "true",
        confirmation: 'Confirmed by a person in the console, who wrote "yes, go ahead".',
      });
      expect(await eventually(() => clicks() === before + 1)).toBe(true);
    } finally {
      await leave();
    }
  });

  it("is never a silent yes: a person's no, or no answer, does not run it and the response says so", async () => {
    const before = clicks();
    const leave = await person("no");
    try {
      const refused = await gemini(confirmed(), { screenshot: false, confirm_timeout: 60 });
      expect(refused).toMatchObject({ success: true, is_error: true });
      expect(refused.tool_result.response.error).toBe(
        'Not executed: a person in the console did not confirm it (wrote "no").',
      );
      expect(refused.tool_result.response.safety_acknowledgement).toBeUndefined();
    } finally {
      await leave();
    }
    const unanswered = await gemini(confirmed(), { screenshot: false, confirm_timeout: 1 });
    expect(unanswered.tool_result.response.error).toBe(
      "Not executed: it awaits a person's confirmation (asked in the console; no answer within 1 s).",
    );
    await desk.cmd("wait", { ms: 300 });
    expect(clicks()).toBe(before);
  });
});

describe("the browser functions", () => {
  it("drives the desktop's browser: open, navigate, back, forward, search; later responses carry the URL", async () => {
    const open = await gemini({ name: "open_web_browser", args: {} }, { screenshot: false });
    expect(open).toMatchObject({ success: true, is_error: false, tool_result: { name: "open_web_browser" } });
    const first = await gemini({ name: "navigate", args: { url: `${base}/` } }, { screenshot: false });
    expect(first.tool_result.response).toEqual({ url: `${base}/` });
    const second = await gemini({ name: "navigate", args: { url: `${base}/second` } }, { screenshot: false });
    expect(second.tool_result.response.url).toBe(`${base}/second`);
    expect(
      (await gemini({ name: "go_back", args: {} }, { screenshot: false })).tool_result.response.url,
    ).toBe(`${base}/`);
    expect(
      (await gemini({ name: "go_forward", args: {} }, { screenshot: false })).tool_result.response.url,
    ).toBe(`${base}/second`);
    // The search engine's home page (here the test's own server, as HANGAR_SEARCH_URL would say).
    expect((await gemini({ name: "search", args: {} }, { screenshot: false })).tool_result.response.url).toBe(
      `${base}/`,
    );
    const hover = await gemini({ name: "hover_at", args: { x: 10, y: 10 } }, { screenshot: false });
    expect(hover.tool_result.response.url).toBe(`${base}/`);
  }, 90_000);
});
