/**
 * nut-js's own window and clipboard API, which the nut-js backend uses on macOS and Windows, run
 * here against Xvfb + openbox (where the backend itself prefers EWMH): the focused window's title,
 * moving and resizing it as xwininfo sees it, and nut-js's clipboard read back with xclip.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NativeServices } from "../../src/desktop/nut/native-services.js";
import { NutWorker } from "../../src/desktop/nut/worker-client.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
import { eventually } from "../support/desktop.js";

const execFileAsync = promisify(execFile);

describe("nut-js window and clipboard API (NativeServices) on X11", () => {
  let display: VirtualDisplay;
  let worker: NutWorker;
  let services: NativeServices;
  let xterm: ChildProcess;
  const run = async (file: string, args: string[]) =>
    (await execFileAsync(file, args, { env: { ...process.env, ...display.env } })).stdout;

  beforeAll(async () => {
    display = await startVirtualDisplay({ width: 1024, height: 768 });
    xterm = spawn("xterm", ["-title", "nativeterm", "-geometry", "80x20+50+60"], {
      env: { ...process.env, ...display.env },
      stdio: "ignore",
    });
    const id = await eventually(
      async () => (await run("xdotool", ["search", "--name", "^nativeterm$"])).trim(),
      15_000,
    );
    await run("xdotool", ["windowactivate", id]).catch(() => undefined);
    worker = new NutWorker({ env: display.env });
    services = new NativeServices(worker);
  });
  afterAll(async () => {
    xterm?.kill("SIGKILL");
    await worker?.close();
    await display?.stop();
  });

  it("names the focused window, moves and resizes it, and cannot minimize it", async () => {
    // Under load the window may not be managed yet when it is first activated: activate it again.
    const active = await eventually(async () => {
      const window = await services.activeWindow();
      if (window?.title === "nativeterm") return window;
      await run("xdotool", ["search", "--name", "^nativeterm$", "windowactivate"]).catch(() => undefined);
      return null;
    }, 15_000);
    await services.setWindowBounds(active.id, { x: 200, y: 150, width: 400, height: 300 });
    const geometry = await eventually(async () => {
      const out = await run("xwininfo", ["-name", "nativeterm"]);
      const field = (name: string) => Number(new RegExp(`${name}:\\s+(-?\\d+)`).exec(out)?.[1]);
      const g = { x: field("Absolute upper-left X"), width: field("Width") };
      return g.width === 400 ? g : null;
    });
    expect(Math.abs(geometry.x - 200)).toBeLessThanOrEqual(5);
    await expect(services.windowAction(active.id, "minimize")).rejects.toMatchObject({
      code: "not_supported",
    });
  });

  it("writes and reads the clipboard through nut-js, checked with xclip", async () => {
    await services.writeClipboard("nut clipboard ✓");
    await eventually(
      async () => (await run("xclip", ["-selection", "clipboard", "-o"])) === "nut clipboard ✓",
    );
    expect(await services.readClipboard()).toBe("nut clipboard ✓");
  });
});
