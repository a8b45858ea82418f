/**
 * Claude's computer toolset (`computer_toolset_20260801`), the server side, on a real 1280x800
 * Xvfb + openbox with the model's display 640x400 (two screen pixels per model pixel): member
 * `tool_use` blocks built as `@anthropic-ai/sdk`'s own types declare them, run by `computer_action`,
 * answered with the `tool_result` blocks the SDK's toolset would render, and their effects read back
 * from outside (a GTK button that appends to a file, an xterm recording the bytes it receives,
 * xdotool's pointer). Its members as MCP tools too.
 */

import { join } from "node:path";
import type {
  BetaComputerToolsetConfigs,
  BetaComputerToolUseBlock,
  BetaToolResultBlockParam,
  BetaToolUseBlock,
} from "@anthropic-ai/sdk/resources/beta";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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

const DISPLAY = { width: 640, height: 400 };
/** The screen pixel a model pixel lands on (two per model pixel). */
const real = (m: number) => Math.floor((m + 0.5) * 2);
/** The SDK's text for a turn's calls after one that failed. */
const NOT_EXECUTED = "Not executed: an earlier computer action in this turn failed.";

type Member = BetaComputerToolUseBlock["name"];
type InputOf<N extends Member> = Extract<BetaComputerToolUseBlock, { name: N }>["input"];
let ids = 0;
/** A member call as the API returns it: its input typed as the SDK declares that member's. */
function call<N extends Member>(name: N, input: InputOf<N>): BetaComputerToolUseBlock {
  return {
    type: "tool_use",
    id: `toolu_${++ids}`,
    name,
    input,
    toolset_name: "computer",
  } as BetaComputerToolUseBlock;
}

let desk: DesktopServer;
/** The button's centre in the model's 640x400 pixels. */
let buttonAt: [number, number];
let xtermId: number;

beforeAll(async () => {
  desk = await startDesktopServer({ width: 1280, height: 800 });
  desk.spawn(PYTHON, [join(APPS, "button.py"), join(desk.dir, "clicks.txt"), "toolsetbutton"]);
  const box = await placeWindow(desk, await desk.waitForWindow("toolsetbutton"), 100, 100);
  buttonAt = [Math.floor((box.x + box.width / 2) / 2), Math.floor((box.y + box.height / 2) / 2)];
  xtermId = await startRecorderTerminal(desk);
  await desk.run("xdotool", ["windowmove", "--sync", String(xtermId), "700", "400"]);
}, 60_000);
afterAll(() => desk?.stop());

/** Runs one block; `extra` adds parameters of computer_action (configs, verify). */
async function run(action: BetaToolUseBlock, extra: Record<string, unknown> = {}) {
  return desk.cmd("computer_action", { action, display: DISPLAY, ...extra });
}
async function turn(actions: BetaToolUseBlock[], extra: Record<string, unknown> = {}) {
  return desk.cmd("computer_action", { actions, display: DISPLAY, ...extra });
}
const clicks = () => desk.read("clicks.txt").split("\n").filter(Boolean).length;
/** A tool_result block as the SDK's toolset renders a pure action's. */
const acknowledged = (use: BetaToolUseBlock, ...lines: string[]): BetaToolResultBlockParam => ({
  type: "tool_result",
  tool_use_id: use.id,
  toolset_name: "computer",
  content: lines.map((text) => ({ type: "text", text })),
});
const refused = (use: BetaToolUseBlock, text: string): BetaToolResultBlockParam => ({
  type: "tool_result",
  tool_use_id: use.id,
  toolset_name: "computer",
  content: [{ type: "text", text }],
  is_error: true,
});

describe("computer_action with Claude's computer toolset", () => {
  it("answers a click with the SDK's tool_result, and the button's handler runs at the mapped point", async () => {
    const click = call("left_click", { coordinate: buttonAt });
    const event = await run(click);
    expect(event).toMatchObject({ success: true, vocabulary: "toolset", is_error: false, display: DISPLAY });
    expect(event.tool_result).toEqual(acknowledged(click, "Clicked."));
    expect(await eventually(() => clicks() === 1)).toBe(true);
    expect(await desk.pointer()).toEqual({ x: real(buttonAt[0]), y: real(buttonAt[1]) });
  });

  it("double and triple clicks are two and three clicks; right and middle clicks are acknowledged", async () => {
    const before = clicks();
    const blocks = [
      call("double_click", { coordinate: buttonAt }),
      call("triple_click", { coordinate: buttonAt }),
      call("right_click", { coordinate: buttonAt }),
      call("middle_click", { coordinate: buttonAt }),
    ];
    const event = await turn(blocks);
    expect(event.tool_results).toEqual([
      acknowledged(blocks[0], "Double-clicked."),
      acknowledged(blocks[1], "Triple-clicked."),
      acknowledged(blocks[2], "Right-clicked."),
      acknowledged(blocks[3], "Middle-clicked."),
    ]);
    expect(await eventually(() => clicks() === before + 5)).toBe(true);
  });

  it("answers every pure member with its acknowledgment, in the turn's order", async () => {
    await desk.run("xdotool", ["mousemove", "1100", "700"]);
    const blocks = [
      call("mouse_move", { coordinate: [560, 350] }),
      call("left_mouse_down", {}),
      call("left_mouse_up", {}),
      call("left_click_drag", { start_coordinate: [550, 340], coordinate: [560, 350] }),
      call("key", { text: "shift", repeat: 2 }),
      call("hold_key", { text: "shift", duration: 0.1 }),
      call("scroll", { coordinate: [560, 350], scroll_direction: "down", scroll_amount: 1 }),
      call("wait", { duration: 0.1 }),
      call("cursor_position", {}),
    ];
    const event = await turn(blocks);
    expect(event).toMatchObject({ success: true, is_error: false });
    expect(event.tool_results).toEqual([
      acknowledged(blocks[0], "Moved the mouse."),
      acknowledged(blocks[1], "Left mouse button pressed."),
      acknowledged(blocks[2], "Left mouse button released."),
      acknowledged(blocks[3], "Dragged."),
      acknowledged(blocks[4], "Pressed shift."),
      acknowledged(blocks[5], "Held shift for 0.1s."),
      acknowledged(blocks[6], "Scrolled down."),
      acknowledged(blocks[7], "Waited 0.1s."),
      acknowledged(blocks[8], "X=560,Y=350"),
    ]);
    expect(await desk.pointer()).toEqual({ x: real(560), y: real(350) });
    expect(event.effects).toHaveLength(blocks.length);
    expect(event.effects[8]).toBeNull();
  });

  it("answers screenshot and zoom with an image block; zoom fills the display with the region", async () => {
    const shot = call("screenshot", {});
    const zoom = call("zoom", { region: [0, 0, 100, 100] });
    const event = await turn([shot, zoom]);
    const [first, second] = event.tool_results as BetaToolResultBlockParam[];
    for (const [result, use, size] of [
      [first, shot, [640, 400]],
      [second, zoom, [400, 400]],
    ] as const) {
      expect(result).toMatchObject({ type: "tool_result", tool_use_id: use.id, toolset_name: "computer" });
      const content = result.content as {
        type: string;
        source: { type: string; media_type: string; data: string };
      }[];
      expect(content).toHaveLength(1);
      expect(content[0]).toMatchObject({
        type: "image",
        source: { type: "base64", media_type: "image/png" },
      });
      const meta = await sharp(Buffer.from(content[0].source.data, "base64")).metadata();
      expect([meta.width, meta.height]).toEqual(size);
    }
  });

  it("types into an xterm, which receives the text", async () => {
    await focusWindow(desk, xtermId);
    const type = call("type", { text: "toolset héllo" });
    const event = await run(type);
    expect(event.tool_result).toEqual(acknowledged(type, "Typed."));
    expect(await eventually(() => desk.read("raw.bin") === "toolset héllo" && desk.read("raw.bin"))).toBe(
      "toolset héllo",
    );
  });

  it("stops a turn at the first failure: the rest answer the SDK's text and do not run", async () => {
    const before = clicks();
    const blocks = [
      call("left_click", { coordinate: buttonAt }),
      call("key", { text: "nosuchkey" }),
      call("left_click", { coordinate: buttonAt }),
      call("double_click", { coordinate: buttonAt }),
    ];
    const event = await turn(blocks);
    expect(event).toMatchObject({ success: true, is_error: true });
    const results = event.tool_results as BetaToolResultBlockParam[];
    expect(results[0]).toEqual(acknowledged(blocks[0], "Clicked."));
    expect(results[1]).toMatchObject({ tool_use_id: blocks[1].id, toolset_name: "computer", is_error: true });
    expect((results[1].content as { text: string }[])[0].text).toMatch(/nosuchkey/);
    expect(results.slice(2)).toEqual([refused(blocks[2], NOT_EXECUTED), refused(blocks[3], NOT_EXECUTED)]);
    expect(event.effects.slice(1)).toEqual([null, null, null]);
    // The first click ran, nothing after the failure did.
    expect(await eventually(() => clicks() === before + 1)).toBe(true);
    await desk.cmd("wait", { ms: 300 });
    expect(clicks()).toBe(before + 1);
  });

  it("answers the other blocks of a turn not at all, and the computer calls in order", async () => {
    const move = call("mouse_move", { coordinate: [300, 300] });
    const event = await desk.cmd("computer_action", {
      actions: [
        { type: "text", text: "I will move the pointer." },
        { type: "tool_use", id: "toolu_other", name: "get_weather", input: { city: "Paris" } },
        move,
      ],
      display: DISPLAY,
    });
    expect(event.tool_results).toEqual([acknowledged(move, "Moved the mouse.")]);
  });

  it("refuses the model's mistakes with an is_error result naming them, and runs nothing", async () => {
    await desk.run("xdotool", ["mousemove", "1000", "700"]);
    const before = clicks();
    const unknown: BetaToolUseBlock = {
      type: "tool_use",
      id: "toolu_x",
      name: "dance",
      input: {},
      toolset_name: "computer",
    };
    expect((await run(unknown)).tool_result).toEqual(
      refused(unknown, "Error: unknown computer toolset member 'dance'"),
    );
    const configs: BetaComputerToolsetConfigs = { left_click: { enabled: false }, zoom: { enabled: true } };
    const disabled = call("left_click", { coordinate: buttonAt });
    const off = await run(disabled, { configs });
    expect(off).toMatchObject({ success: true, is_error: true });
    expect(off.tool_result).toEqual(
      refused(
        disabled,
        "The 'left_click' action is not permitted by this application's permissions and cannot be used in this session.",
      ),
    );
    const outside = call("left_click", { coordinate: [640, 10] });
    expect((await run(outside)).tool_result).toEqual(
      refused(outside, "Coordinate (640, 10) is outside the 640x400 display."),
    );
    const bad = call("scroll", { coordinate: [10, 10], scroll_amount: 1 } as InputOf<"scroll">);
    const badInput = await run(bad);
    expect(badInput.tool_result.is_error).toBe(true);
    expect(badInput.tool_result.content[0].text).toMatch(
      /^invalid input for computer member 'scroll': .*scroll_direction/,
    );
    await desk.cmd("wait", { ms: 300 });
    expect(clicks()).toBe(before);
    expect(await desk.pointer()).toEqual({ x: 1000, y: 700 });
  });

  it("refuses the author's mistakes with invalid_params: a block of another toolset, a bad configs, no id", async () => {
    const browser: BetaToolUseBlock = {
      type: "tool_use",
      id: "toolu_b",
      name: "left_click",
      input: {},
      toolset_name: "browser",
    };
    const other = await run(browser);
    expect(other).toMatchObject({ success: false, code: "invalid_params" });
    expect(other.error).toMatch(/not a member call of the computer toolset/);
    const configs = await run(call("wait", { duration: 0 }), { configs: { dance: { enabled: false } } });
    expect(configs).toMatchObject({ success: false, code: "invalid_params" });
    expect(configs.error).toMatch(/dance/);
    const noId = await run({
      type: "tool_use",
      name: "wait",
      input: { duration: 0 },
      toolset_name: "computer",
    } as never);
    expect(noId).toMatchObject({ success: false, code: "invalid_params" });
    expect(noId.error).toMatch(/id/);
    const none = await turn([{ type: "text", text: "no calls" } as never], { vocabulary: "toolset" });
    expect(none).toMatchObject({ success: false, code: "invalid_params" });
  });

  it("says in the result whether a click had an effect when asked to verify", async () => {
    const click = call("left_click", { coordinate: buttonAt });
    const event = await run(click, { verify: true, verify_ms: 5000 });
    expect(event).toMatchObject({ success: true, effect: "confirmed" });
    expect(event.tool_result.content).toEqual([
      { type: "text", text: "Clicked." },
      { type: "text", text: `Effect: confirmed (${event.evidence.reason}).` },
    ]);
  });

  it("appends a screenshot to the last result when asked", async () => {
    const event = await run(call("mouse_move", { coordinate: [320, 200] }), { screenshot: true });
    const content = event.tool_result.content;
    expect(content[0]).toEqual({ type: "text", text: "Moved the mouse." });
    expect(content.at(-1)).toMatchObject({ type: "image", source: { media_type: "image/png" } });
  });
});

describe("the toolset's members as MCP tools", () => {
  let client: Client;
  beforeAll(async () => {
    client = new Client({ name: "hangar-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${desk.server.url}/mcp`)));
  });
  afterAll(() => client?.close());

  it("lists them beside the commands, prefixed computer_, with the members' input schemas", async () => {
    const { tools } = await client.listTools();
    const names = tools.map((t) => t.name);
    for (const member of ["left_click", "type", "key", "zoom", "screenshot", "left_click_drag", "hold_key"]) {
      expect(names).toContain(`computer_${member}`);
    }
    const drag = tools.find((t) => t.name === "computer_left_click_drag")!;
    expect(Object.keys(drag.inputSchema.properties ?? {})).toEqual(
      expect.arrayContaining(["start_coordinate", "coordinate", "text", "verify"]),
    );
    expect(drag.inputSchema.required).toEqual(["coordinate"]);
  });

  it("runs them on the desktop: a screenshot is an image, a click on the button runs its handler", async () => {
    const shot = (await client.callTool({ name: "computer_screenshot", arguments: {} })) as CallToolResult;
    expect(shot.content).toHaveLength(1);
    expect(shot.content[0]).toMatchObject({ type: "image", mimeType: "image/png" });
    const before = clicks();
    // The display of MCP's tools is `auto`: the 1280x800 screen itself.
    const click = (await client.callTool({
      name: "computer_left_click",
      arguments: { coordinate: [real(buttonAt[0]), real(buttonAt[1])] },
    })) as CallToolResult;
    expect(click.isError).toBeFalsy();
    expect(click.content).toEqual([{ type: "text", text: "Clicked." }]);
    expect(await eventually(() => clicks() === before + 1)).toBe(true);
    const off = (await client.callTool({
      name: "computer_left_click",
      arguments: { coordinate: [5000, 10] },
    })) as CallToolResult;
    expect(off.isError).toBe(true);
    expect((off.content[0] as { text: string }).text).toMatch(/outside the 1280x800 display/);
  });
});
