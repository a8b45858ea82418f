/**
 * The live view on a still screen: with X DAMAGE the server does not capture at all until the
 * screen changes, and a change still reaches the viewer at once.
 */
import { execFile } from "node:child_process";
import { once } from "node:events";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
});
afterAll(async () => {
  await server?.close();
  await manager?.close();
  if (xvfb) await killXvfb(xvfb, n);
});

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
      // The view counts a screen as still 1 s after its last change; then an absence of captures
      // can only be watched for a while.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const before = captures;
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(captures - before).toBe(0);

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
