/**
 * Clicks that always land under openbox: a double click is two clicks with a short gap (with none,
 * the window manager lost the second 1 in 4 times), and a drag moves through intermediate points
 * over its `duration`. Counted by a GTK window, as the application recognises them.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APPS, type DesktopServer, eventually, PYTHON, startDesktopServer } from "../support/desktop.js";

describe("multi-clicks and drags (X11)", () => {
  let desk: DesktopServer;
  let origin: { x: number; y: number };

  beforeAll(async () => {
    desk = await startDesktopServer({ width: 1024, height: 768 });
    desk.spawn(PYTHON, [join(APPS, "multiclick.py"), join(desk.dir, "clicks.log"), "multiclick"]);
    const id = await desk.waitForWindow("multiclick");
    const geometry = await desk.geometry(id);
    origin = { x: geometry.x, y: geometry.y };
  });
  afterAll(() => desk?.stop());

  const lines = () => desk.read("clicks.log").trim().split("\n").filter(Boolean);

  it("delivers 50 double clicks in a row, every one recognised as a double click", async () => {
    // Where the window is now (the window manager may still have moved it after it appeared).
    const id = await desk.waitForWindow("multiclick");
    await desk.cmd("activate_window", { window_id: id });
    origin = await desk.geometry(id);
    const before = lines().length;
    for (let i = 0; i < 50; i++) {
      // Each at another place: two double clicks at one place in a row would make a triple.
      const x = origin.x + 50 + (i % 5) * 100;
      const y = origin.y + 50 + Math.floor(i / 5) * 30;
      expect((await desk.cmd("double_click", { x, y })).success).toBe(true);
    }
    const fresh = () => lines().slice(before);
    const doubles = await eventually(
      () => (fresh().filter((l) => l.startsWith("release")).length >= 100 ? fresh() : null),
      15_000,
    ).catch(() => {
      const got = fresh();
      throw new Error(
        `the window saw ${got.filter((l) => l.startsWith("press")).length} presses and ` +
          `${got.filter((l) => l.startsWith("double")).length} double clicks of 100 and 50:\n${got.join("\n")}`,
      );
    });
    expect(doubles.filter((l) => l.startsWith("double 1")).length).toBe(50);
    expect(doubles.filter((l) => l.startsWith("press 1")).length).toBe(100);
  });

  it("drags over its duration, through intermediate points", async () => {
    await desk.cmd("move_cursor", { x: origin.x + 20, y: origin.y + 20 });
    const before = lines().length;
    const started = performance.now();
    expect((await desk.cmd("drag_to", { x: origin.x + 520, y: origin.y + 320, duration: 0.3 })).success).toBe(
      true,
    );
    const took = performance.now() - started;
    expect(took).toBeGreaterThan(240);
    expect(took).toBeLessThan(600);
    const drag = await eventually(() => {
      const fresh = lines().slice(before);
      return fresh.some((l) => l.startsWith("release 1")) ? fresh : null;
    });
    const motions = drag.filter((l) => l.startsWith("motion"));
    expect(motions.length).toBeGreaterThanOrEqual(5);
    const last = motions.at(-1)!.split(" ");
    expect([Number(last[1]), Number(last[2])]).toEqual([520, 320]);
    // The motions are spread over the duration, not all at the start.
    expect(Number(last[4])).toBeGreaterThan(200);
  });
});
