/**
 * No display, or a display that dies: the server keeps running, desktop commands fail with
 * `unavailable` and say why, other commands keep working, and the desktop comes back by itself once
 * the X server is there again. Also `hangar serve`'s own virtual display.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { silentLogger } from "../../src/common/logger.js";
import { DesktopManager } from "../../src/desktop/manager.js";
import { parseDisplaySize, startDesktopSession } from "../../src/desktop/session.js";
import { startTestServer } from "../support/server.js";
import { freeDisplayNumber, killXvfb, startXvfb } from "../support/xvfb.js";

const execFileAsync = promisify(execFile);

describe("desktop availability", () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  it("without a display, desktop commands fail with unavailable and the rest keep working", async () => {
    const manager = new DesktopManager({ display: "" });
    const server = await startTestServer({ desktop: manager.provider });
    cleanups.push(() => server.close());

    for (const [command, params] of [
      ["screenshot", {}],
      ["get_screen_size", {}],
      ["left_click", {}],
      ["type_text", { text: "x" }],
    ] as const) {
      const { event } = await server.cmd(command, params);
      expect(event, command).toMatchObject({ success: false, code: "unavailable" });
      expect(event.error).toContain("DISPLAY");
    }
    expect((await server.cmd("version")).event.success).toBe(true);
    expect((await server.cmd("run_command", { command: "echo still here" })).event.stdout).toBe(
      "still here\n",
    );
  });

  /** Xvfb on a display number of our choosing (so it can be restarted there) and a server using it. */
  async function serverOnOwnXvfb() {
    const n = freeDisplayNumber();
    const x = { n, xvfb: await startXvfb(n) };
    const manager = new DesktopManager({ display: `:${n}` });
    const server = await startTestServer({ desktop: manager.provider });
    cleanups.push(async () => {
      await server.close();
      await manager.close();
      await killXvfb(x.xvfb, n);
    });
    return { x, server, manager };
  }

  it("warms up before the first command (--warm-up): connected, one screenshot taken; without a display it only says so", async () => {
    const n = freeDisplayNumber();
    const xvfb = await startXvfb(n);
    const lines: { msg: string; ms?: number }[] = [];
    const log = pino({ level: "debug" }, { write: (line: string) => lines.push(JSON.parse(line)) });
    const connects: string[] = [];
    const manager = new DesktopManager({
      display: `:${n}`,
      log,
      connect: async (display) => {
        connects.push(display);
        return (await import("../../src/desktop/x11/backend.js")).X11Backend.connect(display);
      },
    });
    cleanups.push(async () => {
      await manager.close();
      await killXvfb(xvfb, n);
    });
    await manager.warm();
    expect(lines.find((l) => l.msg === "desktop warmed up")?.ms).toBeGreaterThanOrEqual(0);
    // The first command finds the desktop connected: no second connection.
    const server = await startTestServer({ desktop: manager.provider });
    cleanups.push(() => server.close());
    expect((await server.cmd("screenshot")).event.success).toBe(true);
    expect(connects).toEqual([`:${n}`]);

    const absent = new DesktopManager({ display: `:${freeDisplayNumber()}`, log });
    cleanups.push(() => absent.close());
    await expect(absent.warm()).resolves.toBeUndefined();
    expect(lines.some((l) => l.msg === "desktop warm-up failed; the first command connects")).toBe(true);
  });

  it("survives the X server dying and reconnects when it is back", async () => {
    const { x, server } = await serverOnOwnXvfb();
    const n = x.n;
    expect((await server.cmd("get_screen_size")).event.size).toEqual({ width: 640, height: 480 });
    expect((await server.cmd("move_cursor", { x: 10, y: 20 })).event.success).toBe(true);

    await killXvfb(x.xvfb, n);
    for (const [command, params] of [
      ["get_screen_size", {}],
      ["screenshot", {}],
      ["move_cursor", { x: 1, y: 1 }],
    ] as const) {
      const { event } = await server.cmd(command, params);
      expect(event, command).toMatchObject({ success: false, code: "unavailable" });
      expect(event.error).toContain(`:${n}`);
    }
    expect((await server.cmd("version")).event.success).toBe(true);

    x.xvfb = await startXvfb(n);
    const back = await server.cmd("get_screen_size");
    expect(back.event).toMatchObject({ success: true, size: { width: 640, height: 480 } });
    expect((await server.cmd("move_cursor", { x: 123, y: 45 })).event.success).toBe(true);
    const { stdout } = await execFileAsync("xdotool", ["getmouselocation"], {
      env: { ...process.env, DISPLAY: `:${n}` },
    });
    expect(stdout).toContain("x:123 y:45");
    const shot = await server.cmd("screenshot");
    expect(shot.event).toMatchObject({ success: true, width: 640, height: 480 });
  });

  it("fails a command that is waiting on the X server as soon as the server dies", async () => {
    const { x, server, manager } = await serverOnOwnXvfb();
    const n = x.n;
    expect((await server.cmd("get_screen_size")).event.success).toBe(true);
    // The command is known to be waiting on the stopped X server once the backend has been asked.
    const backend = await manager.get();
    let asked = false;
    const cursorPosition = backend.cursorPosition.bind(backend);
    backend.cursorPosition = () => {
      asked = true;
      return cursorPosition();
    };

    x.xvfb.kill("SIGSTOP");
    const started = Date.now();
    const pending = server.cmd("get_cursor_position");
    await vi.waitFor(() => expect(asked).toBe(true), { timeout: 10_000 });
    await killXvfb(x.xvfb, n);
    const { event } = await pending;
    expect(event).toMatchObject({ success: false, code: "unavailable" });
    expect(event.error).toContain(`:${n}`);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("hangar serve's virtual display: started at the asked size, used, and stopped", async () => {
    const saved = { ...process.env };
    const session = await startDesktopSession({ virtualDisplay: "800x600", log: silentLogger });
    cleanups.push(async () => {
      await session.stop();
      for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
      Object.assign(process.env, saved);
    });
    expect(session.virtualDisplay).not.toBeNull();
    expect(process.env.DISPLAY).toBe(session.virtualDisplay?.display);
    const desktop = await session.manager.get();
    expect(await desktop.screenSize()).toEqual({ width: 800, height: 600 });
    await session.stop();
    expect(
      session.virtualDisplay?.xvfb.exitCode !== null || session.virtualDisplay?.xvfb.signalCode !== null,
    ).toBe(true);
  });

  it("hangar serve --panel: the virtual display gets a panel and a wallpaper, gone with it", async () => {
    const saved = { ...process.env };
    const session = await startDesktopSession({ virtualDisplay: "800x600", panel: true, log: silentLogger });
    cleanups.push(async () => {
      await session.stop();
      for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
      Object.assign(process.env, saved);
    });
    const env = { ...process.env, ...session.virtualDisplay?.env };
    const panels = () =>
      execFileAsync("xdotool", ["search", "--class", "lxpanel"], { env }).then(
        ({ stdout }) => stdout.trim().split("\n").filter(Boolean),
        () => [] as string[],
      );
    await vi.waitFor(async () => expect((await panels()).length).toBeGreaterThan(0), { timeout: 10_000 });
    // The wallpaper's gradient (#1f3b57 to #4f7a8c) in the middle of the screen, not a bare root.
    const shot = await (await session.manager.get()).capture({ x: 400, y: 300, width: 1, height: 1 });
    const [r, g, b] = shot.data.subarray(0, 3);
    expect(b).toBeGreaterThan(r);
    expect(Math.abs(r - 55)).toBeLessThan(25);
    expect(Math.abs(g - 90)).toBeLessThan(25);
    expect(Math.abs(b - 113)).toBeLessThan(25);
    // A vertical gradient: near its corners the gradient's ends (the bottom one under the panel), and
    // no steps between neighbouring pixels of a row.
    const corner = async (x: number, y: number) => [
      ...(await (await session.manager.get()).capture({ x, y, width: 1, height: 1 })).data.subarray(0, 3),
    ];
    const near = (color: number[], want: number[]) => color.every((c, i) => Math.abs(c - want[i]) <= 8);
    expect(near(await corner(2, 2), [0x1f, 0x3b, 0x57])).toBe(true);
    expect(near(await corner(797, 560), [0x4f, 0x7a, 0x8c])).toBe(true);
    const row = await (await session.manager.get()).capture({ x: 0, y: 300, width: 800, height: 1 });
    for (let x = 1; x < 800; x++) {
      const step = Math.abs(row.data[x * 4 + 2] - row.data[(x - 1) * 4 + 2]);
      expect(step, `at x=${x}`).toBeLessThanOrEqual(2);
    }
    const panelPid = (await execFileAsync("pgrep", ["-f", "^lxpanel$", "-n"], { env })).stdout.trim();
    await session.stop();
    await vi.waitFor(() => expect(() => process.kill(Number(panelPid), 0)).toThrow(), { timeout: 10_000 });
  });

  it("starts no virtual display when told not to, and checks the size it is given", async () => {
    const session = await startDesktopSession({ virtualDisplay: false, log: silentLogger });
    cleanups.push(() => session.stop());
    expect(session.virtualDisplay).toBeNull();
    expect(parseDisplaySize("1920x1080")).toEqual({ width: 1920, height: 1080 });
    expect(() => parseDisplaySize("huge")).toThrow(/Invalid display size: huge/);
    expect(() => parseDisplaySize("10x10")).toThrow(/Invalid display size/);
  });
});
