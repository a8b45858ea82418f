/**
 * Pointer commands against a real Xvfb + openbox: the pointer is read back with xdotool, buttons and
 * wheel notches from the log of a real `xev` window.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DesktopServer, eventually, startDesktopServer } from "../support/desktop.js";

interface ButtonEvent {
  kind: "press" | "release";
  button: number;
  x: number;
  y: number;
  state: number;
}

describe("pointer commands (X11)", () => {
  let desk: DesktopServer;
  let logPath: string;
  let origin: { x: number; y: number };
  let center: { x: number; y: number };

  beforeAll(async () => {
    desk = await startDesktopServer({ width: 1024, height: 768 });
    logPath = join(desk.dir, "xev.log");
    writeFileSync(logPath, "");
    desk.spawn("sh", [
      "-c",
      `exec xev -name xevrec -geometry 400x300+200+150 -event button > '${logPath}' 2> '${logPath}.err'`,
    ]);
    const id = await desk.waitForWindow("xevrec").catch((err: Error) => {
      throw new Error(`${err.message}; xev wrote: ${desk.read("xev.log.err") || "nothing"}`);
    });
    origin = await desk.geometry(id);
    center = { x: origin.x + 250, y: origin.y + 200 };
  });
  afterAll(() => desk?.stop());

  /** Every button event xev has logged. */
  function buttons(): ButtonEvent[] {
    const text = desk.read("xev.log");
    const events: ButtonEvent[] = [];
    const re =
      /Button(Press|Release) event[^\n]*\n[^\n]*?\((-?\d+),(-?\d+)\)[^\n]*\n\s*state 0x([0-9a-f]+), button (\d+)/g;
    for (const m of text.matchAll(re)) {
      events.push({
        kind: m[1] === "Press" ? "press" : "release",
        x: Number(m[2]),
        y: Number(m[3]),
        state: Number.parseInt(m[4], 16),
        button: Number(m[5]),
      });
    }
    return events;
  }

  async function newButtons(action: () => Promise<unknown>, expected: number): Promise<ButtonEvent[]> {
    const before = buttons().length;
    await action();
    // Generous: on a loaded machine xev can be seconds behind. What arrived is compared below.
    return eventually(() => {
      const all = buttons();
      return all.length >= before + expected ? all.slice(before) : null;
    }, 15_000).catch(() => buttons().slice(before));
  }

  it("moves the pointer where asked, and reports where it is", async () => {
    const event = await desk.cmd("move_cursor", { x: 321, y: 234 });
    expect(event).toMatchObject({ success: true, position: { x: 321, y: 234 } });
    expect(await desk.pointer()).toEqual({ x: 321, y: 234 });
    const position = await desk.cmd("get_cursor_position");
    expect(position.position).toEqual({ x: 321, y: 234 });
    // Far outside the screen: the pointer stops at its edge, and the reply says where.
    const clamped = await desk.cmd("move_cursor", { x: 1e9, y: -5 });
    expect(clamped).toMatchObject({ success: true, position: { x: 1023, y: 0 } });
    expect(await desk.pointer()).toEqual({ x: 1023, y: 0 });
  });

  it("clicks each button at x,y", async () => {
    const events = await newButtons(async () => {
      expect((await desk.cmd("left_click", center)).success).toBe(true);
      expect((await desk.cmd("right_click", center)).success).toBe(true);
      expect((await desk.cmd("middle_click", center)).success).toBe(true);
      expect((await desk.cmd("click", center)).success).toBe(true);
    }, 8);
    expect(events.map((e) => `${e.kind[0]}${e.button}`)).toEqual([
      "p1",
      "r1",
      "p3",
      "r3",
      "p2",
      "r2",
      "p1",
      "r1",
    ]);
    for (const e of events) expect({ x: e.x, y: e.y }).toEqual({ x: 250, y: 200 });
    expect(await desk.pointer()).toEqual(center);
  });

  it("answers every pointer command with where the pointer ended", async () => {
    const at = { x: center.x + 5, y: center.y + 5 };
    const replies = {
      left_click: await desk.cmd("left_click", at),
      double_click: await desk.cmd("double_click", { coordinate: [at.x + 1, at.y] }),
      mouse_down: await desk.cmd("mouse_down", { x: at.x + 2, y: at.y }),
      mouse_up: await desk.cmd("mouse_up", { x: at.x + 3, y: at.y }),
      drag: await desk.cmd("drag", {
        path: [
          [at.x, at.y],
          [at.x + 20, at.y + 10],
        ],
        duration: 0,
      }),
      drag_to: await desk.cmd("drag_to", { x: at.x + 30, y: at.y + 15, duration: 0 }),
      scroll_down: await desk.cmd("scroll_down", { clicks: 1 }),
    };
    expect(replies.left_click.position).toEqual(at);
    expect(replies.double_click.position).toEqual({ x: at.x + 1, y: at.y });
    expect(replies.mouse_down.position).toEqual({ x: at.x + 2, y: at.y });
    expect(replies.mouse_up.position).toEqual({ x: at.x + 3, y: at.y });
    expect(replies.drag.position).toEqual({ x: at.x + 20, y: at.y + 10 });
    expect(replies.drag_to.position).toEqual({ x: at.x + 30, y: at.y + 15 });
    expect(replies.scroll_down.position).toEqual({ x: at.x + 30, y: at.y + 15 });
    // A click aimed off the screen is not reported as landing where it was aimed.
    const off = await desk.cmd("left_click", { x: 5000, y: 10 });
    expect(off).toMatchObject({ success: true, position: { x: 1023, y: 10 } });
  });

  it("double and triple clicks", async () => {
    const events = await newButtons(async () => {
      expect(await desk.cmd("double_click", center)).toMatchObject({ success: true });
      expect(await desk.cmd("triple_click", center)).toMatchObject({ success: true });
    }, 10);
    expect(events.filter((e) => e.kind === "press" && e.button === 1)).toHaveLength(5);
    expect(events.filter((e) => e.kind === "release" && e.button === 1)).toHaveLength(5);
  });

  it("holds modifier keys during a click", async () => {
    const [press] = await newButtons(
      () => desk.cmd("left_click", { ...center, modifiers: ["ctrl", "Shift"] }),
      2,
    );
    expect(press.state & 0x4).toBe(0x4); // ControlMask
    expect(press.state & 0x1).toBe(0x1); // ShiftMask
    // …and releases them afterwards.
    const [plain] = await newButtons(() => desk.cmd("left_click", center), 2);
    expect(plain.state & 0x5).toBe(0);
  });

  it("scrolls with wheel buttons: positive y is up (4), negative down (5), x right (7) and left (6)", async () => {
    const events = await newButtons(async () => {
      await desk.cmd("move_cursor", center);
      await desk.cmd("scroll", { x: 0, y: 2 });
      await desk.cmd("scroll", { x: 0, y: -1 });
      await desk.cmd("scroll", { x: 1, y: 0 });
      await desk.cmd("scroll", { x: -1, y: 0 });
      await desk.cmd("scroll_up", { clicks: 1 });
      await desk.cmd("scroll_down", {});
      await desk.cmd("scroll_direction", { direction: "Left", clicks: 1 });
    }, 16);
    const presses = events.filter((e) => e.kind === "press").map((e) => e.button);
    expect(presses).toEqual([4, 4, 5, 7, 6, 4, 5, 6]);
  });

  it("rejects a scroll direction it does not know, naming it", async () => {
    const event = await desk.cmd("scroll_direction", { direction: "sideways" });
    expect(event).toMatchObject({ success: false, code: "invalid_params" });
    expect(event.error).toContain("sideways");
  });

  it("presses and releases buttons separately, and drags from one point to another", async () => {
    const events = await newButtons(async () => {
      await desk.cmd("mouse_down", { x: center.x - 100, y: center.y - 50, button: "right" });
      await desk.cmd("mouse_up", { x: center.x - 90, y: center.y - 40, button: "right" });
      await desk.cmd("move_cursor", { x: center.x - 120, y: center.y - 60 });
      await desk.cmd("drag_to", { x: center.x + 100, y: center.y + 50 });
      await desk.cmd("drag", {
        path: [
          [center.x, center.y],
          [center.x + 20, center.y + 10],
          [center.x + 40, center.y - 30],
        ],
      });
    }, 6);
    expect(events.map((e) => `${e.kind[0]}${e.button}@${e.x},${e.y}`)).toEqual([
      "p3@150,150",
      "r3@160,160",
      "p1@130,140",
      "r1@350,250",
      "p1@250,200",
      "r1@290,170",
    ]);
    expect(await desk.pointer()).toEqual({ x: center.x + 40, y: center.y - 30 });
  });

  it("rejects an empty drag path and an unknown button, naming the field", async () => {
    const empty = await desk.cmd("drag", { path: [] });
    expect(empty).toMatchObject({ success: false, code: "invalid_params" });
    expect(empty.error).toContain("path");
    const button = await desk.cmd("mouse_down", { button: "fourth" });
    expect(button).toMatchObject({ success: false, code: "invalid_params" });
    expect(button.error).toContain("button");
  });
});
