/**
 * The live view on a still screen: with X DAMAGE the server does not capture at all until the
 * screen changes, and a change still reaches the viewer at once. Each watcher (the live view, the
 * video recorder) is told of a change even when someone else captured the screen after it.
 */
import { execFile } from "node:child_process";
import { once } from "node:events";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import type { DesktopBackend } from "../../src/desktop/backend.js";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startTestServer } from "../support/server.js";
import { freeDisplayNumber, killXvfb, startXvfb } from "../support/xvfb.js";

const execFileAsync = promisify(execFile);
const n = freeDisplayNumber();
let xvfb: Awaited<ReturnType<typeof startXvfb>>;
let manager: DesktopManager;
let server: Awaited<ReturnType<typeof startTestServer>>;
let backend: DesktopBackend;
let captures = 0;
let waits = 0;

beforeAll(async () => {
  xvfb = await startXvfb(n);
  manager = new DesktopManager({ display: `:${n}` });
  server = await startTestServer({ desktop: manager.provider });
  backend = await manager.get();
  const capture = backend.capture.bind(backend);
  backend.capture = (region) => {
    captures++;
    return capture(region);
  };
  const waitForChange = backend.waitForChange?.bind(backend);
  expect(waitForChange).toBeDefined();
  backend.waitForChange = (since, timeoutMs) => {
    waits++;
    return waitForChange!(since, timeoutMs);
  };
});
afterAll(async () => {
  await server?.close();
  await manager?.close();
  if (xvfb) await killXvfb(xvfb, n);
});

/** True as soon as `happened()` is, false after `ms`: how an absence is watched (for a while). */
function happensWithin(ms: number, happened: () => boolean): Promise<boolean> {
  return vi
    .waitFor(() => expect(happened()).toBe(true), { timeout: ms, interval: 20 })
    .then(
      () => true,
      () => false,
    );
}

describe("WS /live on a still screen", () => {
  it("captures nothing while the screen is still, and sends a change at once", async () => {
    const socket = new WebSocket(`${server.url.replace("http", "ws")}/live`);
    const frames: number[] = [];
    socket.on("message", (_data, binary) => {
      if (binary) frames.push(performance.now());
    });
    try {
      await once(socket, "open");
      await expect.poll(() => frames.length).toBeGreaterThan(0);
      // Once the screen has been still for a second the view waits for the X server's DAMAGE
      // notice: the wait is the event. That nothing is captured meanwhile can only be watched for a
      // while: a view that polled would capture 10 times a second (its old rate).
      await vi.waitFor(() => expect(waits).toBeGreaterThan(0), { timeout: 5000 });
      const before = captures;
      expect(await happensWithin(1000, () => captures > before)).toBe(false);

      const sent = frames.length;
      const changed = performance.now();
      await execFileAsync("xsetroot", ["-display", `:${n}`, "-solid", "#ff00ff"]);
      await expect.poll(() => frames.length, { timeout: 2000, interval: 5 }).toBeGreaterThan(sent);
      expect(frames[sent] - changed).toBeLessThan(300);
    } finally {
      socket.terminate();
    }
  });
});

describe("waitForChange with more than one watcher", () => {
  it("tells a watcher of a change that another capture has already read", async () => {
    const mine = await backend.capture();
    await execFileAsync("xsetroot", ["-display", `:${n}`, "-solid", "#10a040"]);
    // Someone else (a screenshot) captures after the change: it sees the new pixels.
    const theirs = await backend.capture();
    expect(theirs).not.toBe(mine);
    expect([...theirs.data.subarray(0, 4)]).not.toEqual([...mine.data.subarray(0, 4)]);
    // The first watcher has not seen it: it is told at once, not after its timeout.
    const asked = performance.now();
    expect(await backend.waitForChange!(mine, 10_000)).toBe(true);
    expect(performance.now() - asked).toBeLessThan(100);
    // The second has seen everything there is: it waits, and its timeout says nothing changed.
    expect(await backend.waitForChange!(theirs, 300)).toBe(false);
    // A watcher with no capture of its own (or one from elsewhere) looks at once.
    expect(await backend.waitForChange!(undefined, 10_000)).toBe(true);
  });
});
