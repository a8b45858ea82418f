/**
 * Fault suite, desktop (issue rows 2, 10, 12 and 16): no descriptor or shared-memory segment leaks
 * while the X server is absent or dies again and again; key names that are `Object.prototype`
 * properties are unknown keys; cancelled typing and drags stop and hold the input queue until they
 * have; a resetting X server does not fail the first command.
 */
import { execFile } from "node:child_process";
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { DesktopManager } from "../../src/desktop/manager.js";
import {
  type DesktopServer,
  eventually,
  focusWindow,
  startDesktopServer,
  startRecorderTerminal,
} from "../support/desktop.js";
import { startTestServer } from "../support/server.js";
import { freeDisplayNumber, killXvfb, startXvfb } from "../support/xvfb.js";
import { shmSegments } from "./support.js";

const execFileAsync = promisify(execFile);

/** The value of `read` once it has stayed the same for half a second (what arrives has stopped arriving). */
async function settled(read: () => string, timeoutMs = 15_000): Promise<string> {
  let last = read();
  let since = Date.now();
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const now = read();
    if (now !== last) [last, since] = [now, Date.now()];
    else if (Date.now() - since >= 500) return now;
  }
  throw new Error("still changing");
}
const fds = () => readdirSync("/proc/self/fd").length;

/**
 * This process's descriptors but the sockets of HTTP connections to or from `port`: both ends of
 * the test client's keep-alive connections are in this process, and on a loaded machine its pool
 * opens a few more than 20 (6 descriptors more in one CI run, kept open as keep-alive sockets are).
 * X connections, pipes and files still count.
 */
function fdsBut(port: number): number {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, "0")}`;
  const http = new Set<string>();
  for (const table of ["/proc/self/net/tcp", "/proc/self/net/tcp6"]) {
    for (const line of readFileSync(table, "utf8").split("\n").slice(1)) {
      const [, local, remote, , , , , , , inode] = line.trim().split(/\s+/);
      if (inode && (local.endsWith(hex) || remote.endsWith(hex))) http.add(inode);
    }
  }
  let count = 0;
  for (const fd of readdirSync("/proc/self/fd")) {
    const target = (() => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return undefined; // closed meanwhile (the directory's own descriptor)
      }
    })();
    const socket = target && /^socket:\[(\d+)\]$/.exec(target)?.[1];
    if (target && !(socket && http.has(socket))) count++;
  }
  return count;
}

describe("the desktop while the X server is absent or dies", () => {
  it("keeps descriptors flat over 200 desktop commands without an X server", async () => {
    const manager = new DesktopManager({ display: `:${freeDisplayNumber()}` });
    const server = await startTestServer({ desktop: manager.provider });
    try {
      const commands: [string, object][] = [
        ["get_cursor_position", {}],
        ["screenshot", {}],
        ["move_cursor", { x: 1, y: 1 }],
        ["get_screen_size", {}],
      ];
      const batch = async (from: number) => {
        const replies = await Promise.all(
          Array.from({ length: 20 }, (_, j) => server.cmd(...commands[(from + j) % 4])),
        );
        for (const { event } of replies) expect(event).toMatchObject({ success: false, code: "unavailable" });
      };
      const port = Number(new URL(server.url).port);
      await batch(0);
      const before = fdsBut(port);
      for (let i = 0; i < 200; i += 20) await batch(i);
      // A descriptor may still be closing on a loaded machine; a leak never comes back down.
      await vi.waitFor(() => expect(fdsBut(port) - before).toBeLessThanOrEqual(2), {
        timeout: 15_000,
        interval: 100,
      });
    } finally {
      await server.close();
      await manager.close();
    }
  });

  it("keeps descriptors and shared-memory segments flat over 50 X server deaths and restarts", async () => {
    const n = freeDisplayNumber();
    const manager = new DesktopManager({ display: `:${n}` });
    const server = await startTestServer({ desktop: manager.provider });
    let xvfb = await startXvfb(n);
    try {
      expect((await server.cmd("screenshot")).event.success).toBe(true);
      await killXvfb(xvfb, n);
      expect((await server.cmd("screenshot")).event.code).toBe("unavailable");
      const before = fds();
      for (let i = 0; i < 50; i++) {
        xvfb = await startXvfb(n);
        const shot = await server.cmd("screenshot");
        expect(shot.event).toMatchObject({ success: true, width: 640, height: 480 });
        expect(shmSegments(process.pid)).toBeGreaterThan(0);
        await killXvfb(xvfb, n);
        expect((await server.cmd("get_screen_size")).event.code).toBe("unavailable");
      }
      expect(shmSegments(process.pid)).toBe(0);
      expect(fds() - before).toBeLessThanOrEqual(5);
    } finally {
      await server.close();
      await manager.close();
      await killXvfb(xvfb, n);
    }
  });

  it("connects to an X server that resets whenever its last client leaves (no -noreset)", async () => {
    const n = freeDisplayNumber();
    const xvfb = await startXvfb(n, { reset: true });
    // Short-lived clients, one after another: each leaving makes the server reset.
    let probing = true;
    const probes = (async () => {
      while (probing) await execFileAsync("xdpyinfo", ["-display", `:${n}`]).catch(() => undefined);
    })();
    try {
      const failures: string[] = [];
      for (let i = 0; i < 30; i++) {
        const manager = new DesktopManager({ display: `:${n}` });
        try {
          await (await manager.get()).screenSize();
        } catch (err) {
          failures.push((err as Error).message);
        } finally {
          await manager.close();
        }
      }
      expect(failures).toEqual([]);
    } finally {
      probing = false;
      await probes;
      await killXvfb(xvfb, n);
    }
  });

  it("answers Object.prototype names as unknown keys", async () => {
    const server = await startTestServer();
    try {
      for (const key of ["constructor", "__proto__", "toString", "hasOwnProperty"]) {
        const { event } = await server.cmd("press_key", { key });
        expect(event, key).toMatchObject({ success: false, code: "invalid_params" });
        expect(event.error, key).toMatch(
          new RegExp(`^Invalid params: key: Unknown key: '${key}'; keys are names`),
        );
        const combo = await server.cmd("hotkey", { keys: ["ctrl", key] });
        expect(combo.event.code, key).toBe("invalid_params");
      }
    } finally {
      await server.close();
    }
  });
});

describe("cancelled input stops and holds the input queue until it has", () => {
  let desk: DesktopServer;
  beforeAll(async () => {
    desk = await startDesktopServer({ width: 1024, height: 768 });
    await focusWindow(desk, await startRecorderTerminal(desk));
  });
  afterAll(() => desk?.stop());

  it("type_text stops typing when its client goes away; the next text is not interleaved", async () => {
    // Hundreds of distinct characters outside the keymap: typed in many small steps (seconds).
    const text = Array.from({ length: 300 }, (_, i) => String.fromCodePoint(0x4e00 + i)).join("");
    const client = new AbortController();
    const typing = desk.server.cmd("type_text", { text }, { signal: client.signal }).catch(() => undefined);
    await eventually(() => desk.read("raw.bin").length > 0, 10_000);
    client.abort();
    await typing;
    const stopped = [...(await settled(() => desk.read("raw.bin")))].length;
    expect(stopped).toBeLessThan(150);
    expect((await desk.server.cmd("type_text", { text: "END" })).event.success).toBe(true);
    expect((await desk.server.cmd("type_text", { text: "!" })).event.success).toBe(true);
    const typed = await settled(() => desk.read("raw.bin"));
    expect(typed.endsWith("END!")).toBe(true);
    expect([...typed].length).toBe(stopped + 4);
  });

  it("drag stops moving when its client goes away; the next move is not undone", async () => {
    await desk.cmd("move_cursor", { x: 0, y: 0 });
    const path = Array.from({ length: 5000 }, (_, i) => [10 + (i % 900), 10 + (i % 700)]);
    const client = new AbortController();
    const dragging = desk.server.cmd("drag", { path }, { signal: client.signal }).catch(() => undefined);
    await eventually(async () => (await desk.pointer()).x > 20, 10_000);
    client.abort();
    await dragging;
    expect((await desk.cmd("move_cursor", { x: 5, y: 5 })).success).toBe(true);
    for (let i = 0; i < 10; i++) expect(await desk.pointer()).toEqual({ x: 5, y: 5 });
  });
});
