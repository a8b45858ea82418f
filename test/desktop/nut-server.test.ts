/**
 * The nut-js backend behind the real server (`hangar serve --backend nut`): commands over HTTP on
 * a real Xvfb + openbox, effects read back from a GTK entry, a GTK event log, xdotool and the
 * pixels of a known pattern; and a display that is missing or dies never takes the server down.
 */
import { spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backendOptions } from "../../src/desktop/choose-backend.js";
import { DesktopManager } from "../../src/desktop/manager.js";
import { NutBackend } from "../../src/desktop/nut/index.js";
import { startVirtualDisplay } from "../../src/desktop/virtual-display.js";
import { APPS, type DesktopServer, eventually, PYTHON, startDesktopServer } from "../support/desktop.js";
import { startTestServer } from "../support/server.js";

const TEXT = "Hello ~`!@#$%^&*()_+-={}[]|\\:;\"'<>,.?/ héllo wörld ✓ 日本語 한국어 😀🎉";
const PATTERN_AT = { x: 600, y: 420 };

describe("nut-js backend through the server", () => {
  let desk: DesktopServer;

  beforeAll(async () => {
    desk = await startDesktopServer({ width: 1024, height: 768 }, { backend: "nut" });
    desk.spawn(PYTHON, [join(APPS, "entry.py"), join(desk.dir, "entry.txt"), "nutentry"]);
    desk.spawn(PYTHON, [join(APPS, "pattern.py"), String(PATTERN_AT.x), String(PATTERN_AT.y)]);
    await desk.waitForWindow("nutentry");
  });
  afterAll(() => desk?.stop());

  it("uses the nut-js backend", async () => {
    expect((await desk.manager.get()).name).toBe("nut");
  });

  it("types text exactly into a GTK entry, and a hotkey selects it for replacing", async () => {
    const id = await desk.waitForWindow("nutentry");
    expect(await desk.cmd("activate_window", { window_id: String(id) })).toMatchObject({ success: true });
    expect(await desk.cmd("get_active_window_title")).toMatchObject({ success: true, title: "nutentry" });
    expect(await desk.cmd("type_text", { text: TEXT })).toMatchObject({ success: true });
    await eventually(() => desk.read("entry.txt") === TEXT).catch(() => undefined); // compared below
    expect(desk.read("entry.txt")).toBe(TEXT);
    expect(await desk.cmd("hotkey", { keys: ["ctrl", "a"] })).toMatchObject({ success: true });
    expect(await desk.cmd("type_text", { text: "Ünïcode → 完了" })).toMatchObject({ success: true });
    await eventually(() => desk.read("entry.txt") === "Ünïcode → 完了").catch(() => undefined);
    expect(desk.read("entry.txt")).toBe("Ünïcode → 完了");
  });

  it("clicks at x,y and moves the pointer, as xdotool sees it", async () => {
    expect(await desk.cmd("left_click", { x: 200, y: 300 })).toMatchObject({ success: true });
    expect(await desk.pointer()).toEqual({ x: 200, y: 300 });
    expect(await desk.cmd("move_cursor", { x: 17, y: 29 })).toMatchObject({ success: true });
    expect(await desk.pointer()).toEqual({ x: 17, y: 29 });
    expect(await desk.cmd("get_cursor_position")).toMatchObject({ position: { x: 17, y: 29 } });
  });

  it("takes a PNG screenshot with the right colours in the right place", async () => {
    /** A screenshot's pixels, as a lookup by screen coordinates. */
    const screenshot = async () => {
      const shot = await desk.cmd("screenshot", {});
      expect(shot).toMatchObject({ success: true, format: "png", width: 1024, height: 768 });
      const { data } = await sharp(Buffer.from(shot.image_data, "base64")).removeAlpha().raw().toBuffer({
        resolveWithObject: true,
      });
      return (px: number, py: number) => [...data.subarray((py * 1024 + px) * 3, (py * 1024 + px) * 3 + 3)];
    };
    const { x, y } = PATTERN_AT;
    const pixel = await eventually(async () => {
      const p = await screenshot();
      return p(x, y).join() === "255,0,0" ? p : null;
    }, 15_000);
    expect(pixel(x + 150, y + 10)).toEqual([0, 255, 0]);
    expect(pixel(x + 250, y + 170)).toEqual([0, 0, 255]);
    expect(pixel(x + 10, y + 190)).toEqual([255, 255, 255]);
  });

  it("sets and reads the clipboard in Unicode", async () => {
    expect(await desk.cmd("set_clipboard", { text: "clip ✓ 日本" })).toMatchObject({ success: true });
    expect(await desk.run("xclip", ["-selection", "clipboard", "-o"])).toBe("clip ✓ 日本");
    expect(await desk.cmd("copy_to_clipboard")).toMatchObject({ success: true, content: "clip ✓ 日本" });
  });
});

describe("nut-js backend without a display", () => {
  it("fails with a clear unavailable error and does not kill the process", async () => {
    const nut = new NutBackend({ env: { DISPLAY: ":4999" } });
    try {
      await expect(nut.moveCursor({ x: 1, y: 1 })).rejects.toMatchObject({
        code: "unavailable",
        message: expect.stringContaining(":4999"),
      });
      await expect(nut.capture()).rejects.toMatchObject({ code: "unavailable" });
    } finally {
      await nut.close();
    }
    expect(process.exitCode ?? 0).toBe(0);
  });

  it("through the server: desktop commands answer unavailable, the rest keep working", async () => {
    const manager = new DesktopManager({ display: ":4998", ...backendOptions("nut") });
    const server = await startTestServer({ desktop: manager.provider });
    try {
      for (const [command, params] of [
        ["screenshot", {}],
        ["move_cursor", { x: 1, y: 1 }],
        ["type_text", { text: "é" }],
        ["get_application_windows", { app: "x" }],
      ] as const) {
        const { event } = await server.cmd(command, params);
        expect(event, command).toMatchObject({ success: false, code: "unavailable" });
        expect(event.error).toContain(":4998");
      }
      expect((await server.cmd("run_command", { command: "echo alive" })).event.stdout).toBe("alive\n");
    } finally {
      await server.close();
      await manager.close();
    }
  });

  it("survives the X server dying under nut-js, and works again once a display is back", async () => {
    const display = await startVirtualDisplay({ width: 640, height: 480, windowManager: false });
    const nut = new NutBackend({ env: display.env });
    let again: ReturnType<typeof spawn> | null = null;
    try {
      expect(await nut.screenSize()).toEqual({ width: 640, height: 480 });
      // The display number stays this test's while its server is dead: its lock names this
      // (living) process, so that another test's X server does not take the number meanwhile.
      const lock = `/tmp/.X${display.display.slice(1)}-lock`;
      writeFileSync(lock, `${String(process.pid).padStart(10)}\n`);
      display.xvfb.kill("SIGKILL");
      await new Promise((resolve) => display.xvfb.once("exit", resolve));
      // nut-js exits its process when it finds the server gone; the call reports it.
      await expect(nut.moveCursor({ x: 5, y: 5 })).rejects.toMatchObject({ code: "unavailable" });
      await expect(nut.screenSize()).rejects.toMatchObject({
        code: "unavailable",
        message: expect.stringContaining(display.display),
      });

      rmSync(lock, { force: true });
      again = spawn("Xvfb", [display.display, "-screen", "0", "800x600x24", "-nolisten", "tcp", "-noreset"], {
        stdio: "ignore",
      });
      const size = await eventually(() => nut.screenSize(), 15_000);
      expect(size).toEqual({ width: 800, height: 600 });
      await nut.moveCursor({ x: 40, y: 50 });
      expect(await nut.cursorPosition()).toEqual({ x: 40, y: 50 });
    } finally {
      await nut.close();
      again?.kill("SIGKILL");
      await display.stop();
    }
  });
});
