/**
 * The container's VNC (src/container/vnc.ts) on a real Xvfb with Debian's x11vnc: nothing runs for
 * it until a viewer comes, raw or through the noVNC WebSocket; viewers share one x11vnc, which ends
 * a while after the last one left; one that dies is started again for the next viewer; one that
 * cannot start (no X server on its display) turns the viewer away with the reason logged, and the
 * relays keep listening.
 */
import { execFileSync } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { WebSocket } from "ws";
import { freeLoopbackPort } from "../../src/common/listen.js";
import { greeted, startVnc, type VncServers } from "../../src/container/vnc.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";

const LINGER_MS = 500;

/** The x11vnc processes this test's process started. */
function x11vncs(): number[] {
  try {
    return execFileSync("pgrep", ["-P", String(process.pid), "-x", "x11vnc"], { encoding: "utf8" })
      .trim()
      .split("\n")
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** The System V shared-memory segments process `pid` made that are still there. */
function segmentsOf(pid: number): string[] {
  return readFileSync("/proc/sysvipc/shm", "utf8")
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f.length > 6 && Number(f[4]) === pid)
    .map((f) => f[1]);
}

/** A raw VNC connection that has read the server's greeting (fails if it closes first). */
async function rawViewer(port: number, what = "of a viewer"): Promise<{ socket: Socket; greeting: string }> {
  const socket = connect({ host: "127.0.0.1", port });
  socket.on("error", () => undefined);
  const greeting = await new Promise<string>((resolve, reject) => {
    socket.once("data", (chunk) => resolve(String(chunk).slice(0, 12)));
    socket.once("close", () => reject(new Error(`closed before the greeting ${what}`)));
  });
  return { socket, greeting };
}

async function webViewer(port: number): Promise<{ ws: WebSocket; greeting: string }> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/websockify`, { origin: `http://127.0.0.1:${port}` });
  ws.on("error", () => undefined);
  const [message] = await once(ws, "message");
  return { ws, greeting: Buffer.from(message as Buffer).toString() };
}

describe("VNC started by its viewers", () => {
  let display: VirtualDisplay;
  beforeAll(async () => {
    display = await startVirtualDisplay({ width: 640, height: 480, windowManager: false });
  });
  afterAll(() => display?.stop());

  async function start(env: Record<string, string>, log: string[]) {
    const settings = {
      port: await freeLoopbackPort(),
      webPort: await freeLoopbackPort(),
      password: "watch-it",
    };
    const vnc = await startVnc(
      settings,
      env,
      { host: "127.0.0.1" },
      {
        log: (m) => log.push(m),
        lingerMs: LINGER_MS,
      },
    );
    return { settings, vnc };
  }

  it("starts x11vnc for the first viewer, shares it, and ends it once the last has gone", async () => {
    const log: string[] = [];
    const { settings, vnc } = await start(display.env, log);
    let servers: VncServers | undefined = vnc;
    try {
      expect(x11vncs()).toEqual([]);
      const raw = await rawViewer(settings.port);
      expect(raw.greeting).toBe("RFB 003.008\n");
      const web = await webViewer(settings.webPort);
      expect(web.greeting).toBe("RFB 003.008\n");
      expect(x11vncs()).toHaveLength(1);

      // One viewer leaves: the other keeps it running past the linger (a wait for nothing to happen).
      raw.socket.destroy();
      await new Promise((r) => setTimeout(r, LINGER_MS * 2));
      expect(x11vncs()).toHaveLength(1);
      web.ws.close();
      await vi.waitFor(() => expect(x11vncs()).toEqual([]), { timeout: 10_000 });

      // Killed under a viewer: its connection ends, and the next viewer gets a new one.
      const watched = await webViewer(settings.webPort);
      const [pid] = x11vncs();
      const closed = once(watched.ws, "close");
      process.kill(pid, "SIGKILL");
      await closed;
      // What the killed x11vnc left in System V shared memory is removed.
      await expect.poll(() => segmentsOf(pid), { timeout: 5_000 }).toEqual([]);
      const again = await rawViewer(settings.port, "after the kill");
      expect(again.greeting).toBe("RFB 003.008\n");
      expect(x11vncs()).not.toContain(pid);
      // Told either by its exit or, when the viewer came first, by the connection it closed.
      expect(log.join("\n")).toMatch(
        /x11vnc ended \(SIGKILL\); it starts again for the next viewer|x11vnc did not answer a viewer \(.*\); it starts again for it/,
      );

      // Stopped with a viewer connected: nothing is left, the ports are free.
      servers = undefined;
      await vnc.stop();
      expect(x11vncs()).toEqual([]);
      await expect(rawViewer(settings.port)).rejects.toThrow();
      again.socket.destroy();
    } finally {
      await servers?.stop();
    }
  }, 60_000);

  it("turns a viewer away, saying why, when x11vnc cannot start, and serves the next once it can", async () => {
    const log: string[] = [];
    // A display with no X server: x11vnc exits before it listens.
    const { settings, vnc } = await start({ ...display.env, DISPLAY: ":65000" }, log);
    try {
      const ws = new WebSocket(`ws://127.0.0.1:${settings.webPort}/websockify`, {
        origin: `http://127.0.0.1:${settings.webPort}`,
      });
      ws.on("error", () => undefined);
      const [code, reason] = await once(ws, "close");
      expect(code).toBe(1011);
      expect(String(reason)).toBe("VNC could not start");
      const socket = connect({ host: "127.0.0.1", port: settings.port });
      socket.on("error", () => undefined);
      await once(socket, "close");
      expect(log.join("\n")).toMatch(/a VNC viewer was turned away: x11vnc exited with code \d+/);
      expect(x11vncs()).toEqual([]);
      // The pages are still served.
      expect((await fetch(`http://127.0.0.1:${settings.webPort}/`)).status).not.toBe(500);
    } finally {
      await vnc.stop();
    }
  }, 30_000);

  it("gives up on a VNC server that accepts a viewer but never greets, and lets the connection go", async () => {
    const silent = createServer();
    const accepted: Socket[] = [];
    silent.on("connection", (socket) => accepted.push(socket));
    silent.listen(0, "127.0.0.1");
    await once(silent, "listening");
    try {
      const { port } = silent.address() as AddressInfo;
      await expect(greeted(port, 200)).rejects.toThrow(
        `the VNC server on port ${port} did not greet within 200 ms`,
      );
      expect(accepted).toHaveLength(1);
      if (!accepted[0].closed) await once(accepted[0], "close");
    } finally {
      silent.close();
    }
  });
});
