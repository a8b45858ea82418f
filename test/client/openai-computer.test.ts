/**
 * `HangarComputer` (the OpenAI Agents SDK's `Computer`) on a real 1280x800 desktop shown to the
 * model as 1024x640: called directly, and by the SDK's own runner and computer-tool plumbing with
 * the SDK's `ScriptedModel` in place of the API (no API is reachable), whose scripted reply is a
 * GA `computer_call` with a batch of actions. Effects are read back from the desktop.
 */
import { join } from "node:path";
import { Agent, computerTool, Runner } from "@openai/agents";
import { assistantMessage, ScriptedModel } from "@openai/agents/testing";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Hangar } from "../../src/client/index.js";
import { HangarComputer } from "../../src/client/openai-agents.js";
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

const display = { width: 1024, height: 640 };
const SCALE = 1024 / 1280;

let desk: DesktopServer;
let xterm: number;
let buttonWindow: number;
/** Centres in the model's pixels. */
let button: [number, number];
let terminal: [number, number];
let computer: HangarComputer;

const clicks = () => desk.read("button.txt").split("\n").filter(Boolean).length;
const typed = () => desk.readBytes("raw.bin").toString("utf8");

async function centreOf(id: number): Promise<[number, number]> {
  const g = await desk.geometry(id);
  return [Math.round((g.x + g.width / 2) * SCALE), Math.round((g.y + g.height / 2) * SCALE)];
}

beforeAll(async () => {
  desk = await startDesktopServer({ width: 1280, height: 800 });
  xterm = await startRecorderTerminal(desk);
  await placeWindow(desk, xterm, 0, 0);
  desk.spawn(PYTHON, [join(APPS, "button.py"), join(desk.dir, "button.txt"), "agentsbutton"]);
  buttonWindow = await desk.waitForWindow("agentsbutton");
  await placeWindow(desk, buttonWindow, 800, 500);
  button = await centreOf(buttonWindow);
  terminal = await centreOf(xterm);
  computer = new HangarComputer(desk.server.url, { display });
}, 60_000);

afterAll(async () => {
  await computer?.close();
  await desk?.stop();
});

describe("HangarComputer, called directly", () => {
  it("knows its display: given, or the screen's own size once connected", async () => {
    expect(computer.dimensions).toEqual([1024, 640]);
    expect(computer.environment).toBe("ubuntu");
    const hangar = new Hangar({ url: desk.server.url });
    const connected = await HangarComputer.connect(hangar);
    expect(connected.dimensions).toEqual([1280, 800]);
    await connected.close();
    // A client it was given stays open.
    expect((await hangar.version()).protocol).toBeGreaterThan(0);
    await hangar.close();
  });

  it("screenshot is a base64 PNG of the display size", async () => {
    const png = Buffer.from(await computer.screenshot(), "base64");
    expect(await sharp(png).metadata()).toMatchObject({ format: "png", width: 1024, height: 640 });
  });

  it("click, type and keypress land where the model means, in its pixels", async () => {
    await focusWindow(desk, buttonWindow);
    const before = clicks();
    await computer.click(button[0], button[1], "left");
    await eventually(() => clicks() === before + 1);

    await computer.click(terminal[0], terminal[1], "left");
    await eventually(async () => (await desk.run("xdotool", ["getactivewindow"])).trim() === String(xterm));
    const start = typed().length;
    await computer.type("direct ok");
    await computer.keypress(["ENTER"]);
    await eventually(() => typed().slice(start) === "direct ok\r");

    await computer.move(100, 50);
    // The screen pixel under the centre of the model's pixel (100, 50): (100.5, 50.5) x 1.25.
    expect(await desk.pointer()).toEqual({ x: 125, y: 63 });
  });

  it("a point off the display is an error saying so, and nothing happens", async () => {
    await focusWindow(desk, buttonWindow);
    const before = clicks();
    await expect(computer.click(5000, 5, "left")).rejects.toThrow(
      "Coordinate (5000, 5) is outside the 1024x640 display.",
    );
    // The next click is the only one that arrives (input is delivered in order).
    await computer.click(button[0], button[1], "left");
    await eventually(() => clicks() >= before + 1);
    expect(clicks()).toBe(before + 1);
  });
});

describe("HangarComputer through the Agents SDK's runner (ScriptedModel)", () => {
  it("runs a GA computer_call's batch of actions in order, then sends the screenshot back", async () => {
    await focusWindow(desk, buttonWindow);
    const before = clicks();
    const start = typed().length;
    const model = new ScriptedModel([
      [
        {
          type: "computer_call",
          callId: "call_batch_1",
          status: "completed",
          actions: [
            { type: "click", x: button[0], y: button[1], button: "left" },
            { type: "click", x: terminal[0], y: terminal[1], button: "left" },
            { type: "type", text: "from the agent" },
            { type: "keypress", keys: ["ENTER"] },
            { type: "screenshot" },
          ],
        },
      ],
      [assistantMessage("Done.")],
    ]);
    const agent = new Agent({ name: "desktop", model, tools: [computerTool({ computer })] });
    const result = await new Runner().run(agent, "Press the button, then type in the terminal.");
    expect(result.finalOutput).toBe("Done.");
    model.assertComplete();

    await eventually(() => typed().slice(start) === "from the agent\r");
    await eventually(() => clicks() >= before + 1);
    expect(clicks()).toBe(before + 1);

    // The second model call carries the computer_call_result: a PNG of the display.
    const input = model.calls[1].request.input;
    const items = (Array.isArray(input) ? input : []) as { type: string; callId?: string; output?: any }[];
    const output = items.find((item) => item.type === "computer_call_result");
    expect(output).toMatchObject({ callId: "call_batch_1", output: { type: "computer_screenshot" } });
    const url: string = output?.output.data;
    expect(url.startsWith("data:image/png;base64,")).toBe(true);
    const meta = await sharp(Buffer.from(url.slice(url.indexOf(",") + 1), "base64")).metadata();
    expect([meta.width, meta.height]).toEqual([1024, 640]);
  }, 30_000);
});
