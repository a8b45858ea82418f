/**
 * `HangarComputerToolset` (Claude's `computer_toolset_20260801`) through the Anthropic SDK's own
 * pipeline, on a real 1280x800 desktop shown to the model as 1024x640: member `tool_use` blocks
 * typed as the SDK defines them, answered by `toolResult()` and by the SDK's tool runner (against
 * recorded API replies served on loopback; no API is reachable), with the effects read back from
 * the desktop (an xterm's bytes, a button's file).
 */
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import type * as Beta from "@anthropic-ai/sdk/resources/beta";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HangarComputerToolset } from "../../src/client/anthropic.js";
import { Hangar } from "../../src/client/index.js";
import {
  APPS,
  type DesktopServer,
  eventually,
  focusWindow,
  PYTHON,
  placeWindow,
  startDesktopServer,
  startRecorderTerminal,
} from "../support/desktop.js";
import { type RecordedApi, startRecordedApi } from "../support/recorded-api.js";

const display = { width: 1024, height: 640 };
/** Model pixels per screen pixel. */
const SCALE = 1024 / 1280;
type Block = Exclude<Beta.BetaToolResultBlockParam["content"], string | undefined>[number];

let desk: DesktopServer;
let xterm: number;
let buttonWindow: number;
/** The button's centre in the model's pixels. */
let button: [number, number];
let toolset: HangarComputerToolset;
const confirmed: { member: string; input: unknown }[] = [];
let id = 0;

/** A member call exactly as the model emits it (the SDK's own block types). */
function use<B extends Beta.BetaResponseComputerToolUseBlock>(name: B["name"], input: B["input"]): B {
  return { type: "tool_use", id: `toolu_${++id}`, name, input, toolset_name: "computer" } as B;
}

function texts(content: Beta.BetaToolResultBlockParam["content"]): string[] {
  return ((content ?? []) as Block[]).flatMap((block) => (block.type === "text" ? [block.text] : []));
}

async function imageOf(result: Beta.BetaToolResultBlockParam) {
  const image = (result.content as Block[])[0];
  if (image?.type !== "image" || image.source.type !== "base64") throw new Error("expected an image block");
  expect(image.source.media_type).toBe("image/png");
  return sharp(Buffer.from(image.source.data, "base64")).metadata();
}

/** What the xterm's recorder receives while `action` runs. */
async function typedInto(action: () => Promise<unknown>, expected: string): Promise<string> {
  await focusWindow(desk, xterm);
  const before = desk.readBytes("raw.bin").length;
  await action();
  const fresh = () => desk.readBytes("raw.bin").subarray(before).toString("utf8");
  return eventually(() => (fresh().length >= expected.length ? fresh() : null)).catch(fresh);
}

const clicks = () => desk.read("button.txt").split("\n").filter(Boolean).length;

/**
 * Clicks the button once more and checks the count is then exactly `expected`: a click wrongly sent
 * earlier would have arrived before this one (input is delivered in order).
 */
async function markerClick(expected: number) {
  await focusWindow(desk, buttonWindow);
  await toolset.toolResult(
    use<Beta.BetaResponseComputerLeftClickToolUseBlock>("left_click", { coordinate: button }),
  );
  await eventually(() => clicks() >= expected);
  expect(clicks()).toBe(expected);
}

beforeAll(async () => {
  desk = await startDesktopServer({ width: 1280, height: 800 });
  xterm = await startRecorderTerminal(desk);
  desk.spawn(PYTHON, [join(APPS, "button.py"), join(desk.dir, "button.txt"), "toolsetbutton"]);
  const win = await desk.waitForWindow("toolsetbutton");
  buttonWindow = win;
  const at = await placeWindow(desk, win, 700, 400);
  button = [Math.round((at.x + at.width / 2) * SCALE), Math.round((at.y + at.height / 2) * SCALE)];
  toolset = new HangarComputerToolset(desk.server.url, {
    display,
    confirm: (ctx) => {
      confirmed.push({ member: ctx.member, input: ctx.input });
      return !(ctx.member === "type" && (ctx.input as Beta.BetaComputerTypeInput).text === "refused");
    },
  });
}, 60_000);

afterAll(async () => {
  await toolset?.close();
  await desk?.stop();
});

describe("HangarComputerToolset.toolResult on a real desktop", () => {
  it("screenshot is one image block of the display size, answering its tool_use", async () => {
    const call = use<Beta.BetaResponseComputerScreenshotToolUseBlock>("screenshot", {});
    const result = await toolset.toolResult(call);
    expect(result).toMatchObject({ type: "tool_result", tool_use_id: call.id, toolset_name: "computer" });
    expect(result.is_error).toBeUndefined();
    expect(result.content).toHaveLength(1);
    expect(await imageOf(result)).toMatchObject({ width: 1024, height: 640 });
  });

  it("type and key reach the focused xterm, each shown to confirm first", async () => {
    confirmed.length = 0;
    let result: Beta.BetaToolResultBlockParam | undefined;
    const got = await typedInto(async () => {
      result = await toolset.toolResult(
        use<Beta.BetaResponseComputerTypeToolUseBlock>("type", { text: "hello toolset" }),
      );
    }, "hello toolset");
    expect(got).toBe("hello toolset");
    expect(texts(result?.content)).toEqual(["Typed."]);
    const enter = await typedInto(async () => {
      result = await toolset.toolResult(
        use<Beta.BetaResponseComputerKeyToolUseBlock>("key", { text: "Return" }),
      );
    }, "\r");
    expect(enter).toBe("\r");
    expect(texts(result?.content)).toEqual(["Pressed Return."]);
    const thrice = await typedInto(
      () =>
        toolset.toolResult(use<Beta.BetaResponseComputerKeyToolUseBlock>("key", { text: "x", repeat: 3 })),
      "xxx",
    );
    expect(thrice).toBe("xxx");
    expect(confirmed).toEqual([
      { member: "type", input: { text: "hello toolset" } },
      { member: "key", input: { text: "Return" } },
      { member: "key", input: { text: "x", repeat: 3 } },
    ]);
  });

  it("a click in the model's pixels lands on the button, whose handler writes its file", async () => {
    await focusWindow(desk, buttonWindow);
    const before = clicks();
    const result = await toolset.toolResult(
      use<Beta.BetaResponseComputerLeftClickToolUseBlock>("left_click", { coordinate: button }),
    );
    expect(texts(result.content)).toEqual(["Clicked."]);
    expect(await eventually(() => clicks() === before + 1)).toBe(true);
    // The pointer is where the model put it, in its own pixels.
    const where = await toolset.toolResult(
      use<Beta.BetaResponseComputerCursorPositionToolUseBlock>("cursor_position", {}),
    );
    expect(texts(where.content)).toEqual([`X=${button[0]},Y=${button[1]}`]);
    // zoom: a region of the model's display, scaled up to fill it.
    const zoom = await toolset.toolResult(
      use<Beta.BetaResponseComputerZoomToolUseBlock>("zoom", { region: [0, 0, 512, 320] }),
    );
    expect(await imageOf(zoom)).toMatchObject({ width: 1024, height: 640 });
  });

  it("an unknown member, a point off the display, a refusal: the model's error, and nothing happens", async () => {
    const unknown = await toolset.toolResult({
      type: "tool_use",
      id: "toolu_unknown",
      name: "teleport",
      input: {},
      toolset_name: "computer",
    });
    expect(unknown).toMatchObject({ is_error: true, tool_use_id: "toolu_unknown", toolset_name: "computer" });
    expect(texts(unknown.content)[0]).toContain("unknown computer toolset member 'teleport'");

    const before = clicks();
    const off = await toolset.toolResult(
      use<Beta.BetaResponseComputerLeftClickToolUseBlock>("left_click", { coordinate: [5000, 5] }),
    );
    expect(off.is_error).toBe(true);
    expect(texts(off.content)).toEqual(["Coordinate (5000, 5) is outside the 1024x640 display."]);

    // The refused call types nothing: the next (approved) one is all the xterm receives.
    const got = await typedInto(async () => {
      const result = await toolset.toolResult(
        use<Beta.BetaResponseComputerTypeToolUseBlock>("type", { text: "refused" }),
      );
      expect(result.is_error).toBe(true);
      expect(texts(result.content)[0]).toMatch(/^The user did not grant permission to run 'type'/);
      await toolset.toolResult(use<Beta.BetaResponseComputerTypeToolUseBlock>("type", { text: "after" }));
    }, "after");
    expect(got).toBe("after");
    expect(clicks()).toBe(before);
  });

  it("a member disabled by configs is refused as the SDK words it, and does not click", async () => {
    const limited = new HangarComputerToolset(new Hangar({ url: desk.server.url }), {
      display,
      configs: {
        left_click: { enabled: false },
        type: { enabled: false },
        key: { enabled: false },
        hold_key: { enabled: false },
      },
    });
    try {
      expect(limited.toJSON()).toEqual({
        type: "computer_toolset_20260801",
        configs: {
          left_click: { enabled: false },
          type: { enabled: false },
          key: { enabled: false },
          hold_key: { enabled: false },
        },
      });
      const before = clicks();
      const result = await limited.toolResult(
        use<Beta.BetaResponseComputerLeftClickToolUseBlock>("left_click", { coordinate: button }),
      );
      expect(result.is_error).toBe(true);
      expect(texts(result.content)).toEqual([
        "The 'left_click' action is not permitted by this application's permissions and cannot be used in this session.",
      ]);
      // A click sent after it is the only one the button gets (input arrives in order).
      await markerClick(before + 1);
    } finally {
      await limited.close();
    }
  });

  it("with verify, the model reads whether the action had an effect", async () => {
    const verifying = new HangarComputerToolset(new Hangar({ url: desk.server.url }), {
      display,
      verify: true,
      configs: { type: { enabled: false }, key: { enabled: false }, hold_key: { enabled: false } },
    });
    try {
      await focusWindow(desk, buttonWindow);
      const pressed = await verifying.toolResult(
        use<Beta.BetaResponseComputerLeftClickToolUseBlock>("left_click", { coordinate: button }),
      );
      expect(texts(pressed.content)).toEqual([
        "Clicked.",
        expect.stringMatching(/^Effect: confirmed \(.+\)\.$/),
      ]);
    } finally {
      await verifying.close();
    }
  });

  it("without a confirm, a toolset that offers type, key and hold_key is refused by the SDK's constructor", () => {
    expect(() => new HangarComputerToolset(desk.server.url)).toThrow(/requires a confirm callable/);
  });
});

describe("the SDK's tool runner with a HangarComputerToolset (recorded replies on loopback)", () => {
  let api: RecordedApi;

  beforeAll(async () => {
    api = await startRecordedApi();
  });
  afterAll(() => api?.close());

  const message = (content: unknown[], stop_reason: string) => ({
    id: `msg_${api.requests.length}`,
    type: "message",
    role: "assistant",
    model: "claude-sonnet-5-5",
    content,
    stop_reason,
    stop_sequence: null,
    usage: { input_tokens: 1, output_tokens: 1 },
  });

  it("sends the toolset entry, runs a turn's members in order, and answers the rest after a failure", async () => {
    await focusWindow(desk, buttonWindow);
    const before = clicks();
    const turn = [
      use<Beta.BetaResponseComputerLeftClickToolUseBlock>("left_click", { coordinate: button }),
      use<Beta.BetaResponseComputerLeftClickToolUseBlock>("left_click", { coordinate: [2000, 2000] }),
      use<Beta.BetaResponseComputerLeftClickToolUseBlock>("left_click", { coordinate: button }),
    ];
    api.replies.push(
      message([{ type: "text", text: "Clicking twice, with a mistake between." }, ...turn], "tool_use"),
      message([{ type: "text", text: "Done." }], "end_turn"),
    );
    const client = new Anthropic({
      apiKey: "sk-test",
      baseURL: api.url,
    });
    const runner = client.beta.messages.toolRunner({
      model: "claude-sonnet-5-5",
      max_tokens: 1024,
      tools: [toolset],
      messages: [{ role: "user", content: "Press the button." }],
    });
    const final = await runner.runUntilDone();
    expect(final.content).toEqual([{ type: "text", text: "Done." }]);
    const requests = api.requests;
    expect(requests.map((r) => r.url)).toEqual(["/v1/messages", "/v1/messages"]);
    expect(requests[0].body.tools).toEqual([{ type: "computer_toolset_20260801" }]);
    // The runner continues the thread: the second request holds the tool results only.
    const results = requests[1].body.messages[0].content;
    expect(results.map((r: { tool_use_id: string }) => r.tool_use_id)).toEqual(turn.map((b) => b.id));
    expect(results.map((r: { toolset_name: string }) => r.toolset_name)).toEqual([
      "computer",
      "computer",
      "computer",
    ]);
    expect(results[0].is_error).toBeUndefined();
    expect(results[1]).toMatchObject({ is_error: true });
    expect(JSON.stringify(results[1].content)).toContain("outside the 1024x640 display");
    expect(results[2]).toMatchObject({
      is_error: true,
      content: "Not executed: an earlier computer action in this turn failed.",
    });
    // One click happened: the first; the third never ran (a click sent after is the second).
    await markerClick(before + 2);
  }, 30_000);
});
