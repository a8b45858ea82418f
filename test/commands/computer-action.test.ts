/**
 * computer_action on a real 1920x1080 Xvfb + openbox, with the model's display 1280x720 (1.5 screen
 * pixels per model pixel): every action of both vocabularies, its effect read back from outside
 * (xev's log of button, wheel and key events with their modifier state and server time, xdotool's
 * pointer, a GTK entry's text, screenshots decoded with sharp).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APPS, type DesktopServer, eventually, PYTHON, startDesktopServer } from "../support/desktop.js";

interface XEvent {
  kind: string;
  time: number;
  x: number;
  y: number;
  state: number;
  button?: number;
  keysym?: string;
}

const DISPLAY = { width: 1280, height: 720 };
/** Where the screenshots are kept to look at (gitignored). */
const SHOTS = join(import.meta.dirname, "../../.tmp");
const SHIFT = 0x1;
const CTRL = 0x4;
/** The screen pixel a model pixel of the 1280x720 display lands on. */
const real = (m: number) => Math.floor((m + 0.5) * 1.5);

describe("computer_action (X11, 1920x1080 screen)", () => {
  let desk: DesktopServer;
  let xevId: number;

  beforeAll(async () => {
    desk = await startDesktopServer({ width: 1920, height: 1080 });
    const log = join(desk.dir, "xev.log");
    writeFileSync(log, "");
    desk.spawn("sh", [
      "-c",
      `exec xev -name actionlog -geometry 900x600+300+150 -event button -event keyboard > '${log}'`,
    ]);
    xevId = await desk.waitForWindow("actionlog");
  }, 30_000);
  afterAll(() => desk?.stop());

  function events(): XEvent[] {
    const re =
      /(Key|Button)(Press|Release) event[^\n]*\n[^\n]*?time (\d+), \((-?\d+),(-?\d+)\)[^\n]*\n\s*state 0x([0-9a-f]+), (?:button (\d+)|keycode \d+ \(keysym 0x[0-9a-f]+, ([^)]+)\))/g;
    return [...desk.read("xev.log").matchAll(re)].map((m) => ({
      kind: `${m[2] === "Press" ? "+" : "-"}${m[1] === "Key" ? m[8] : `b${m[7]}`}`,
      time: Number(m[3]),
      x: Number(m[4]),
      y: Number(m[5]),
      state: Number.parseInt(m[6], 16),
      button: m[7] ? Number(m[7]) : undefined,
      keysym: m[8],
    }));
  }

  /** Runs the action and returns the xev events it caused (at least `count`). */
  async function caused(count: number, work: () => Promise<unknown>): Promise<XEvent[]> {
    const before = events().length;
    await work();
    return eventually(() => {
      const all = events();
      return all.length >= before + count ? all.slice(before) : null;
    });
  }

  async function act(action: Record<string, unknown>, extra: Record<string, unknown> = {}) {
    const event = await desk.cmd("computer_action", {
      action,
      display: DISPLAY,
      screenshot: false,
      ...extra,
    });
    expect(event, JSON.stringify(action)).toMatchObject({ success: true, is_error: false });
    return event;
  }

  async function focusXev() {
    await eventually(async () => {
      await desk.run("xdotool", ["windowactivate", String(xevId)]).catch(() => undefined);
      return (await desk.run("xdotool", ["getactivewindow"])).trim() === String(xevId);
    });
  }

  const kinds = (list: XEvent[]) => list.map((e) => e.kind);

  describe("Anthropic", () => {
    it("clicks each button at the mapped point, with modifiers from `text` held", async () => {
      // Six button events and ctrl's press and release.
      const list = await caused(8, async () => {
        await act({ action: "left_click", coordinate: [400, 300] });
        await act({ action: "right_click", coordinate: [401, 301], text: "ctrl" });
        await act({ action: "middle_click", coordinate: [402, 302] });
      });
      const buttons = list.filter((e) => e.button !== undefined);
      expect(kinds(buttons)).toEqual(["+b1", "-b1", "+b3", "-b3", "+b2", "-b2"]);
      expect(await desk.pointer()).toEqual({ x: real(402), y: real(302) });
      expect(buttons[2].state & CTRL).toBe(CTRL);
      expect(buttons[0].state & CTRL).toBe(0);
    });

    it("holds a click's modifier given as `key` instead of `text`; both and different is the model's error", async () => {
      const list = await caused(4, () => act({ action: "left_click", coordinate: [400, 300], key: "ctrl" }));
      const press = list.find((e) => e.kind === "+b1")!;
      expect(press.state & CTRL).toBe(CTRL);
      const before = events().length;
      const both = await desk.cmd("computer_action", {
        action: { action: "left_click", coordinate: [400, 300], text: "shift", key: "ctrl" },
        display: DISPLAY,
        screenshot: false,
      });
      expect(both).toMatchObject({ success: true, is_error: true });
      expect(both.text).toMatch(/modifier keys/);
      expect(events().length).toBe(before);
    });

    it("types keypad digits for KP_0 and KP_1, with no Shift", async () => {
      await focusXev();
      const keys = await caused(4, () => act({ action: "key", text: "KP_0 KP_1" }));
      // Key events only (a late button event of the test before is not this one's).
      expect(kinds(keys.filter((e) => e.keysym))).toEqual(["+KP_0", "-KP_0", "+KP_1", "-KP_1"]);
    });

    it("double and triple clicks, the triple with shift held", async () => {
      // Ten button events and shift's press and release.
      const list = await caused(12, async () => {
        await act({ action: "double_click", coordinate: [420, 320] });
        await act({ action: "triple_click", coordinate: [420, 320], text: "shift" });
      });
      const presses = list.filter((e) => e.kind === "+b1");
      expect(presses).toHaveLength(5);
      expect(presses.slice(0, 2).every((e) => (e.state & SHIFT) === 0)).toBe(true);
      expect(presses.slice(2).every((e) => (e.state & SHIFT) === SHIFT)).toBe(true);
    });

    it("scrolls by scroll_amount notches at the coordinate, with ctrl held", async () => {
      // Six button events and ctrl's press and release.
      const list = await caused(8, () =>
        act({
          action: "scroll",
          coordinate: [500, 400],
          scroll_direction: "down",
          scroll_amount: 3,
          text: "ctrl",
        }),
      );
      const wheel = list.filter((e) => e.kind === "+b5");
      expect(wheel).toHaveLength(3);
      expect(wheel.every((e) => (e.state & CTRL) === CTRL)).toBe(true);
      expect(await desk.pointer()).toEqual({ x: real(500), y: real(400) });
      const left = await caused(4, () =>
        act({ action: "scroll", scroll_direction: "left", scroll_amount: 2 }),
      );
      expect(kinds(left.filter((e) => e.button))).toEqual(["+b6", "-b6", "+b6", "-b6"]);
    });

    it("moves the pointer, presses and releases the left button, and drags from start to end", async () => {
      await act({ action: "mouse_move", coordinate: [300, 250] });
      expect(await desk.pointer()).toEqual({ x: real(300), y: real(250) });
      const downUp = await caused(2, async () => {
        await act({ action: "left_mouse_down" });
        await act({ action: "left_mouse_up", coordinate: [310, 260] });
      });
      expect(kinds(downUp)).toEqual(["+b1", "-b1"]);
      expect([downUp[1].x - downUp[0].x, downUp[1].y - downUp[0].y]).toEqual([
        real(310) - real(300),
        real(260) - real(250),
      ]);
      const drag = await caused(2, () =>
        act({ action: "left_click_drag", start_coordinate: [350, 300], coordinate: [450, 380] }),
      );
      const press = drag.find((e) => e.kind === "+b1")!;
      const release = drag.find((e) => e.kind === "-b1")!;
      expect([release.x - press.x, release.y - press.y]).toEqual([
        real(450) - real(350),
        real(380) - real(300),
      ]);
      expect(await desk.pointer()).toEqual({ x: real(450), y: real(380) });
    });

    it("reports the cursor position in the model's pixels", async () => {
      await desk.run("xdotool", ["mousemove", "960", "540"]);
      const event = await act({ action: "cursor_position" });
      expect(event.text).toBe("X=640,Y=360");
      expect(event.tool_result.content).toEqual([{ type: "text", text: "X=640,Y=360" }]);
    });

    it("presses keys in xdotool syntax and holds one for `duration` (within 10 %)", async () => {
      await focusXev();
      const keys = await caused(6, () => act({ action: "key", text: "ctrl+l Return" }));
      expect(kinds(keys)).toEqual(["+Control_L", "+l", "-l", "-Control_L", "+Return", "-Return"]);
      const held = await caused(2, () => act({ action: "hold_key", text: "shift", duration: 1 }));
      expect(kinds(held)).toEqual(["+Shift_L", "-Shift_L"]);
      const ms = held[1].time - held[0].time;
      expect(ms).toBeGreaterThanOrEqual(900);
      expect(ms).toBeLessThanOrEqual(1100);
    });

    it("releases a held key when the client goes away mid-hold", async () => {
      await focusXev();
      const before = events().length;
      const controller = new AbortController();
      const params = { action: { action: "hold_key", text: "shift", duration: 30 }, screenshot: false };
      const pending = desk.server
        .cmd("computer_action", params, { signal: controller.signal })
        .catch(() => null);
      await eventually(() =>
        events()
          .slice(before)
          .some((e) => e.kind === "+Shift_L"),
      );
      controller.abort();
      await pending;
      const held = await eventually(() => {
        const list = events().slice(before);
        return list.length >= 2 ? list : null;
      });
      expect(kinds(held)).toEqual(["+Shift_L", "-Shift_L"]);
      expect(held[1].time - held[0].time).toBeLessThan(5000);
    });

    it("waits `duration` seconds", async () => {
      const started = performance.now();
      await act({ action: "wait", duration: 0.3 });
      const ms = performance.now() - started;
      expect(ms).toBeGreaterThanOrEqual(295);
      expect(ms).toBeLessThan(600);
    });

    it("answers a screenshot at the model's display size, and a zoom with the region's own pixels", async () => {
      const shot = await desk.cmd("computer_action", { action: { action: "screenshot" }, display: DISPLAY });
      expect(shot).toMatchObject({ success: true, is_error: false, display: DISPLAY });
      const block = shot.tool_result.content[0];
      expect(block).toMatchObject({ type: "image", source: { type: "base64", media_type: "image/png" } });
      const meta = await sharp(Buffer.from(block.source.data, "base64")).metadata();
      expect([meta.width, meta.height]).toEqual([1280, 720]);

      // Model region [200, 100, 520, 300) is screen [300, 150)..[780, 450): 480x300, within 1280x720.
      const zoom = await desk.cmd("computer_action", {
        action: { action: "zoom", region: [200, 100, 520, 300] },
        display: DISPLAY,
      });
      const zoomed = Buffer.from(zoom.tool_result.content[0].source.data, "base64");
      const full = await desk.cmd("screenshot", {});
      const crop = await sharp(Buffer.from(full.image_data, "base64"))
        .extract({ left: 300, top: 150, width: 480, height: 300 })
        .raw()
        .toBuffer({ resolveWithObject: true });
      const got = await sharp(zoomed).raw().toBuffer({ resolveWithObject: true });
      expect([got.info.width, got.info.height]).toEqual([480, 300]);
      expect(got.data.equals(crop.data)).toBe(true);
      mkdirSync(SHOTS, { recursive: true });
      await sharp(zoomed).toFile(join(SHOTS, "computer-action-zoom.png"));
      await sharp(Buffer.from(block.source.data, "base64")).toFile(
        join(SHOTS, "computer-action-screenshot.png"),
      );
    });

    it("gives the model a short error for its mistakes, and the author invalid_params for theirs", async () => {
      const off = await desk.cmd("computer_action", {
        action: { action: "left_click", coordinate: [1280, 5] },
        display: DISPLAY,
      });
      expect(off).toMatchObject({
        success: true,
        is_error: true,
        tool_result: {
          type: "tool_result",
          is_error: true,
          content: [{ type: "text", text: "Coordinate (1280, 5) is outside the 1280x720 display." }],
        },
      });
      const unknown = await desk.cmd("computer_action", { action: { action: "dance" } });
      expect(unknown).toMatchObject({ success: true, is_error: true });
      expect(unknown.text).toMatch(/^Unknown action/);
      const long = await desk.cmd("computer_action", { action: { action: "wait", duration: 101 } });
      expect(long.text).toMatch(/duration/);
      const key = await desk.cmd("computer_action", { action: { action: "key", text: "nosuchkey" } });
      expect(key).toMatchObject({ success: true, is_error: true });

      const size = await desk.cmd("computer_action", {
        action: { action: "screenshot" },
        display: { width: 0, height: 5 },
      });
      expect(size).toMatchObject({ success: false, code: "invalid_params" });
      const which = await desk.cmd("computer_action", { action: { x: 1 } });
      expect(which).toMatchObject({ success: false, code: "invalid_params" });
    });
  });

  describe("OpenAI", () => {
    it("clicks left, right, wheel, back and forward, with keys held", async () => {
      // Ten button events and ctrl's press and release: counting ten, the last click could be missed.
      const list = await caused(12, async () => {
        for (const button of ["left", "right", "wheel", "back", "forward"]) {
          await act({
            type: "click",
            x: 400,
            y: 300,
            button,
            ...(button === "right" ? { keys: ["CTRL"] } : {}),
          });
        }
      });
      const presses = list.filter((e) => e.kind.startsWith("+b"));
      expect(presses.map((e) => e.button)).toEqual([1, 3, 2, 8, 9]);
      expect(presses[1].state & CTRL).toBe(CTRL);
      expect(await desk.pointer()).toEqual({ x: real(400), y: real(300) });
    });

    it("double clicks, and scrolls pixels as wheel notches (100 px each, positive y down)", async () => {
      const double = await caused(4, () => act({ type: "double_click", x: 410, y: 310 }));
      expect(kinds(double.filter((e) => e.button))).toEqual(["+b1", "-b1", "+b1", "-b1"]);
      // Ten button events and shift's press and release.
      const wheel = await caused(12, () =>
        act({ type: "scroll", x: 500, y: 400, scroll_x: -200, scroll_y: 300, keys: ["SHIFT"] }),
      );
      const presses = wheel.filter((e) => e.kind.startsWith("+b"));
      expect(presses.map((e) => e.button)).toEqual([5, 5, 5, 6, 6]);
      expect(presses.every((e) => (e.state & SHIFT) === SHIFT)).toBe(true);
      expect(await desk.pointer()).toEqual({ x: real(500), y: real(400) });
    });

    it("moves, and drags along a path", async () => {
      await act({ type: "move", x: 333, y: 222 });
      expect(await desk.pointer()).toEqual({ x: real(333), y: real(222) });
      const drag = await caused(2, () =>
        act({
          type: "drag",
          path: [
            { x: 350, y: 300 },
            { x: 400, y: 320 },
            { x: 450, y: 380 },
          ],
        }),
      );
      const press = drag.find((e) => e.kind === "+b1")!;
      const release = drag.find((e) => e.kind === "-b1")!;
      expect([release.x - press.x, release.y - press.y]).toEqual([
        real(450) - real(350),
        real(380) - real(300),
      ]);
    });

    it("presses keys by OpenAI's names, together", async () => {
      await focusXev();
      const keys = await caused(4, () => act({ type: "keypress", keys: ["CTRL", "ARROWLEFT"] }));
      expect(kinds(keys)).toEqual(["+Control_L", "+Left", "-Left", "-Control_L"]);
      const enter = await caused(2, () => act({ type: "keypress", keys: ["ENTER"] }));
      expect(kinds(enter)).toEqual(["+Return", "-Return"]);
    });

    it("waits a second", async () => {
      const started = performance.now();
      await act({ type: "wait" });
      expect(performance.now() - started).toBeGreaterThanOrEqual(995);
    });

    it("answers a computer_call_output echoing call_id, with a data-URL screenshot at the display size", async () => {
      const event = await desk.cmd("computer_action", {
        action: { type: "screenshot" },
        display: { width: 1024, height: 768 },
        call_id: "call_abc",
      });
      expect(event).toMatchObject({
        success: true,
        vocabulary: "openai",
        tool_result: {
          type: "computer_call_output",
          call_id: "call_abc",
          output: { type: "computer_screenshot" },
        },
      });
      const url: string = event.tool_result.output.image_url;
      expect(url.startsWith("data:image/png;base64,")).toBe(true);
      const meta = await sharp(Buffer.from(url.slice(url.indexOf(",") + 1), "base64")).metadata();
      expect([meta.width, meta.height]).toEqual([1024, 768]);
    });
  });

  /**
   * The GA computer tool's shapes, as openai-node 7.5.0 declares them (src/resources/responses/
   * responses.ts):
   *   interface ResponseComputerToolCall { id; call_id; pending_safety_checks; status;
   *     type: 'computer_call'; action?: …; actions?: ComputerActionList }
   *   type ComputerActionList = Array<ComputerAction>   // "Flattened batched actions for `computer_use`"
   *   ComputerAction.Click { button; type: 'click'; x; y; keys?: Array<string> | null }
   *   ComputerAction.DoubleClick { keys: Array<string> | null; type: 'double_click'; x; y }
   *   ComputerAction.Scroll / Move / Drag { …; keys?: Array<string> | null }
   *   ResponseInputItem.ComputerCallOutput { call_id; output: ResponseComputerToolCallOutputScreenshot;
   *     type: 'computer_call_output' }
   *   ResponseComputerToolCallOutputScreenshot { type: 'computer_screenshot'; file_id?; image_url? }
   */
  describe("OpenAI GA: a computer_call with a batch of actions", () => {
    let entryId: number;
    /** The entry's centre in the model's 1280x720 pixels. */
    let entryAt: { x: number; y: number };

    beforeAll(async () => {
      desk.spawn(PYTHON, [join(APPS, "entry.py"), join(desk.dir, "ga.txt"), "gaentry"]);
      entryId = await desk.waitForWindow("gaentry");
      await desk.run("xdotool", ["windowmove", "--sync", String(entryId), "150", "900"]);
      const box = await eventually(async () => {
        const g = await desk.geometry(entryId);
        return g.y >= 900 ? g : null;
      });
      entryAt = {
        x: Math.floor((box.x + box.width / 2) / 1.5),
        y: Math.floor((box.y + box.height / 2) / 1.5),
      };
    });

    it("runs five actions in order with keys: null, and answers one computer_screenshot", async () => {
      const call = {
        type: "computer_call",
        id: "cu_ga_1",
        call_id: "call_ga_batch",
        status: "completed",
        pending_safety_checks: [],
        actions: [
          { type: "click", button: "left", x: entryAt.x, y: entryAt.y, keys: null },
          { type: "type", text: "first" },
          { type: "double_click", x: entryAt.x, y: entryAt.y, keys: null },
          { type: "keypress", keys: ["CTRL", "A"] },
          { type: "type", text: "ga batch" },
        ],
      };
      const event = await desk.cmd("computer_action", { computer_call: call, display: DISPLAY });
      expect(event).toMatchObject({
        success: true,
        vocabulary: "openai",
        is_error: false,
        tool_result: {
          type: "computer_call_output",
          call_id: "call_ga_batch",
          output: { type: "computer_screenshot" },
        },
      });
      expect(await eventually(() => desk.read("ga.txt") === "ga batch" && desk.read("ga.txt"))).toBe(
        "ga batch",
      );
      const url: string = event.tool_result.output.image_url;
      const png = Buffer.from(url.slice(url.indexOf(",") + 1), "base64");
      const meta = await sharp(png).metadata();
      expect([meta.width, meta.height]).toEqual([DISPLAY.width, DISPLAY.height]);
      mkdirSync(SHOTS, { recursive: true });
      writeFileSync(join(SHOTS, "computer-action-ga-batch.png"), png);
    });

    it("takes keys: null on scroll, move and drag, and the older single action", async () => {
      for (const action of [
        { type: "move", x: 300, y: 200, keys: null },
        { type: "scroll", x: 300, y: 200, scroll_x: 0, scroll_y: 100, keys: null },
        {
          type: "drag",
          path: [
            { x: 300, y: 200 },
            { x: 310, y: 210 },
          ],
          keys: null,
        },
      ]) {
        await act(action);
      }
      expect(await desk.pointer()).toEqual({ x: real(310), y: real(210) });
      const batch = await desk.cmd("computer_action", {
        actions: [{ type: "move", x: 320, y: 220, keys: null }],
        display: DISPLAY,
        screenshot: false,
      });
      expect(batch).toMatchObject({ success: true, is_error: false });
      expect(await desk.pointer()).toEqual({ x: real(320), y: real(220) });
      const preview = await desk.cmd("computer_action", {
        computer_call: {
          type: "computer_call",
          call_id: "call_one",
          action: { type: "move", x: 330, y: 230 },
        },
        display: DISPLAY,
        screenshot: false,
      });
      expect(preview).toMatchObject({ success: true, tool_result: { call_id: "call_one" } });
      expect(await desk.pointer()).toEqual({ x: real(330), y: real(230) });
    });

    it("a batch with an unknown action in the middle does nothing and says which", async () => {
      await desk.run("xdotool", ["mousemove", "10", "10"]);
      const before = desk.read("ga.txt");
      const event = await desk.cmd("computer_action", {
        actions: [
          { type: "click", button: "left", x: entryAt.x, y: entryAt.y },
          { type: "type", text: "never" },
          { type: "teleport", x: 1, y: 1 },
          { type: "move", x: 5, y: 5 },
          { type: "move", x: 2000, y: 5 },
        ],
        display: DISPLAY,
      });
      expect(event).toMatchObject({
        success: true,
        is_error: true,
        tool_result: { output: { type: "computer_screenshot" } },
      });
      expect(event.text).toMatch(/^actions\[2\]: Unknown type/);
      const offDisplay = await desk.cmd("computer_action", {
        actions: [
          { type: "type", text: "never" },
          { type: "move", x: 2000, y: 5 },
        ],
        display: DISPLAY,
        screenshot: false,
      });
      expect(offDisplay.text).toBe("actions[1]: Coordinate (2000, 5) is outside the 1280x720 display.");
      expect(await desk.pointer()).toEqual({ x: 10, y: 10 });
      expect(desk.read("ga.txt")).toBe(before);
    });

    it("stops at the first action that fails, after the ones before it ran", async () => {
      const event = await desk.cmd("computer_action", {
        actions: [
          { type: "move", x: 100, y: 100 },
          { type: "keypress", keys: ["NOSUCHKEY"] },
          { type: "move", x: 200, y: 200 },
        ],
        display: DISPLAY,
        screenshot: false,
      });
      expect(event).toMatchObject({ success: true, is_error: true });
      expect(event.text).toMatch(
        /^actions\[1\]: keypress failed: .*NOSUCHKEY.* 1 action before it ran, the 1 after it did not\.$/,
      );
      expect(await desk.pointer()).toEqual({ x: real(100), y: real(100) });
    });

    it("refuses what is not one request: two shapes at once, a call with both action and actions, an Anthropic batch", async () => {
      for (const params of [
        { action: { type: "wait" }, actions: [{ type: "wait" }] },
        {},
        { computer_call: { call_id: "c", action: { type: "wait" }, actions: [{ type: "wait" }] } },
        { actions: [{ action: "screenshot" }], vocabulary: "anthropic" },
        { actions: [] },
      ]) {
        const event = await desk.cmd("computer_action", params);
        expect(event, JSON.stringify(params)).toMatchObject({ success: false, code: "invalid_params" });
      }
    });
  });

  it("types text into a GTK entry in both vocabularies", async () => {
    desk.spawn(PYTHON, [join(APPS, "entry.py"), join(desk.dir, "entry.txt"), "actionentry"]);
    const id = await desk.waitForWindow("actionentry");
    await eventually(async () => {
      await desk.run("xdotool", ["windowactivate", String(id)]).catch(() => undefined);
      return (await desk.run("xdotool", ["getactivewindow"])).trim() === String(id);
    });
    await act({ action: "type", text: "Hé, " });
    await act({ type: "type", text: "world ✓" });
    expect(await eventually(() => desk.read("entry.txt") === "Hé, world ✓" && desk.read("entry.txt"))).toBe(
      "Hé, world ✓",
    );
  }, 30_000);

  describe("round-trip scaling: every corner and the centre of the model's space hit the right pixel", () => {
    for (const display of [
      { width: 1280, height: 720 },
      { width: 1024, height: 768 },
    ]) {
      it(`${display.width}x${display.height} on 1920x1080 (stretched)`, async () => {
        const points: [number, number, number, number][] = [
          [0, 0, 0, 0],
          [display.width - 1, 0, 1919, 0],
          [0, display.height - 1, 0, 1079],
          [display.width - 1, display.height - 1, 1919, 1079],
          [display.width / 2, display.height / 2, 960, 540],
        ];
        for (const [mx, my, rx, ry] of points) {
          await act({ action: "left_click", coordinate: [mx, my] }, { display });
          const at = await desk.pointer();
          expect(Math.abs(at.x - rx), `${mx},${my}`).toBeLessThanOrEqual(1);
          expect(Math.abs(at.y - ry), `${mx},${my}`).toBeLessThanOrEqual(1);
          const back = await act({ action: "cursor_position" }, { display });
          expect(back.text).toBe(`X=${mx},Y=${my}`);
        }
      });
    }

    it("'auto' keeps the screen's aspect within each model's limits", async () => {
      const anthropic = await act({ action: "cursor_position" }, { display: "auto" });
      expect(anthropic.display).toEqual({ width: 1349, height: 759 });
      const openai = await act({ type: "wait" }, { display: "auto" });
      expect(openai.display).toEqual({ width: 1365, height: 768 });
    });
  });
});
