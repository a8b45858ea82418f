/**
 * A private desktop (Xvfb + openbox) with a computer server driving it, and helpers that read the
 * effects back from outside the server (xdotool, xprop, files written by test apps).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import type { ComputerServerOptions } from "../../src/computer/server.js";
import { atspiProvider } from "../../src/desktop/atspi/index.js";
import { audioFromEnv } from "../../src/desktop/audio.js";
import { type BackendName, backendOptions } from "../../src/desktop/choose-backend.js";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
import { startTestServer } from "./server.js";

const execFileAsync = promisify(execFile);
export const APPS = join(import.meta.dirname, "../desktop/apps");
/** The system Python, which has python3-gi (a pyenv python3 on PATH may not). */
export const PYTHON = "/usr/bin/python3";

export async function startDesktopServer(
  size: { width?: number; height?: number; accessibility?: boolean; audio?: boolean } = {},
  options: { backend?: BackendName; server?: ComputerServerOptions } = {},
) {
  const display: VirtualDisplay = await startVirtualDisplay(size);
  if (size.audio && display.audioError)
    throw new Error(`the desktop's sound did not start: ${display.audioError}`);
  const manager = new DesktopManager({
    display: display.display,
    ...backendOptions(options.backend ?? "x11"),
  });
  // With an accessibility bus: the server reads it (AT-SPI of this display).
  const a11y = size.accessibility ? atspiProvider(display.env) : undefined;
  const server = await startTestServer({
    ...(a11y ? { accessibility: a11y } : {}),
    // The desktop's own sound, or none (whatever this process's variables say).
    audio: audioFromEnv(display.env) ?? null,
    ...options.server,
    desktop: manager.provider,
  });
  const env = { ...process.env, ...display.env };
  const children: ChildProcess[] = [];
  const dir = mkdtempSync(join(tmpdir(), "hangar-desktop-test-"));

  /** Runs a program on this display and returns its stdout. */
  const run = async (file: string, args: string[]) => (await execFileAsync(file, args, { env })).stdout;

  return {
    display,
    manager,
    server,
    env,
    dir,
    run,
    /** Sends a command and returns the `/cmd` event. */
    async cmd(command: string, params?: unknown) {
      return (await server.cmd(command, params)).event;
    },
    /** Starts a program on this display; it is killed at `stop()`. */
    spawn(file: string, args: string[]) {
      const child = spawn(file, args, { env, stdio: "ignore" });
      children.push(child);
      return child;
    },
    async pointer(): Promise<{ x: number; y: number }> {
      const out = await run("xdotool", ["getmouselocation"]);
      const match = /x:(-?\d+) y:(-?\d+)/.exec(out);
      return { x: Number(match?.[1]), y: Number(match?.[2]) };
    },
    /** Waits for a mapped window whose title matches exactly; returns its id. */
    async waitForWindow(title: string, timeoutMs = 30_000): Promise<number> {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const out = await run("xdotool", ["search", "--onlyvisible", "--name", `^${title}$`]).catch(() => "");
        const id = out.trim().split("\n").filter(Boolean)[0];
        if (id) return Number(id);
        await sleep(50);
      }
      throw new Error(`no window titled ${title} appeared`);
    },
    /** A window's client area on the screen, from xwininfo (xdotool's position is off by the frame). */
    async geometry(id: number) {
      const out = await run("xwininfo", ["-id", String(id)]);
      const field = (name: string) => Number(new RegExp(`${name}:\\s+(-?\\d+)`).exec(out)?.[1]);
      return {
        x: field("Absolute upper-left X"),
        y: field("Absolute upper-left Y"),
        width: field("Width"),
        height: field("Height"),
      };
    },
    readBytes(name: string): Buffer {
      try {
        return readFileSync(join(dir, name));
      } catch {
        return Buffer.alloc(0);
      }
    },
    read(name: string): string {
      try {
        return readFileSync(join(dir, name), "utf8");
      } catch {
        return "";
      }
    },
    async stop() {
      for (const child of children) child.kill("SIGKILL");
      a11y?.close();
      await server.close();
      await manager.close();
      await display.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export type DesktopServer = Awaited<ReturnType<typeof startDesktopServer>>;

/**
 * Polls until `check` returns a truthy value (or throws its last error after the timeout). The
 * default timeout is generous: on a loaded machine, X clients can be seconds behind.
 */
export async function eventually<T>(
  check: () => T | null | undefined | false | Promise<T | null | undefined | false>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value) return value;
      last = new Error("condition not met");
    } catch (err) {
      last = err;
    }
    await sleep(30);
  }
  throw last;
}

/** An xterm running the raw-mode byte recorder (`apps/recorder.py`): what is typed into it lands in `<dir>/raw.bin`. */
export async function startRecorderTerminal(desk: DesktopServer): Promise<number> {
  desk.spawn("xterm", [
    "-u8",
    "-title",
    "rawrec",
    "-xrm",
    "XTerm*metaSendsEscape: true",
    "-e",
    PYTHON,
    join(APPS, "recorder.py"),
    join(desk.dir, "raw.bin"),
  ]);
  return desk.waitForWindow("rawrec");
}

/**
 * Moves a window so that its client area is at about `x, y` (the frame adds a little) and waits
 * until it is there; returns the client area.
 */
export async function placeWindow(desk: DesktopServer, id: number, x: number, y: number) {
  await desk.run("xdotool", ["windowmove", "--sync", String(id), String(x), String(y)]);
  return eventually(async () => {
    const g = await desk.geometry(id);
    return Math.abs(g.x - x) < 50 && Math.abs(g.y - y) < 50 ? g : null;
  });
}

/** Activates a window and waits until it has the focus. */
export async function focusWindow(desk: DesktopServer, id: number) {
  await eventually(async () => {
    if ((await desk.run("xdotool", ["getactivewindow"]).catch(() => "")).trim() === String(id)) return true;
    await desk.run("xdotool", ["windowactivate", String(id)]).catch(() => undefined);
    return false;
  }, 15_000);
}
