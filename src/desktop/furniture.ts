/**
 * A desktop's furniture, started once the X server and window manager run: a wallpaper (a vertical
 * gradient tiled from a narrow column, x11/root-background.ts) and the lxpanel panel (task list,
 * clock). The container and the guest image start them (`hangar serve --panel`). Both are optional:
 * a wallpaper that cannot be painted or a missing panel is logged and the desktop works without it.
 * The panel ends with the X server. Its menu starts programs, so with a command user
 * (`--command-user`) it runs as that user.
 *
 * The gradient is painted over the desktop's own X connection, without sharp: drawing a picture of
 * the screen loaded libvips into the server at start (13 MB of its memory for a desktop no agent has
 * looked at yet), and xwallpaper's picture of the whole screen held 4 MB of the X server's memory at
 * 1280x800, 8 MB at 1080p (docs/performance.md).
 */
import { spawn } from "node:child_process";
import { asUser, type CommandUser, userCwd, userEnv } from "../os/command-user.js";
import { findProgram } from "../os/launch.js";
import { XConnection } from "./x11/connection.js";
import { paintRootGradient, type Rgb } from "./x11/root-background.js";

/** The wallpaper's gradient, top to bottom: #1f3b57 to #4f7a8c. */
export const GRADIENT: readonly [Rgb, Rgb] = [
  [0x1f, 0x3b, 0x57],
  [0x4f, 0x7a, 0x8c],
];

interface Desktop {
  env: Record<string, string>;
  /** The user the agent's programs run as, when not this process's. */
  user?: CommandUser;
}

export async function startDesktopApps(desktop: Desktop, log: (message: string) => void): Promise<void> {
  await showGradient(desktop.env.DISPLAY).catch((err: Error) => log(`no wallpaper: ${err.message}`));
  if (!findProgram("lxpanel")) return log("no panel: lxpanel is not installed");
  const { user } = desktop;
  const base = user ? userEnv(user, process.env) : process.env;
  const panel = spawn(...asUser(user, "lxpanel", []), {
    env: { ...base, ...desktop.env },
    cwd: user ? userCwd(user, undefined) : undefined,
    stdio: "ignore",
  });
  panel.on("error", (err) => log(`the panel did not start: ${err.message}`));
  panel.unref();
}

async function showGradient(display: string | undefined) {
  if (!display) throw new Error("the desktop has no DISPLAY");
  const conn = await XConnection.open(display);
  try {
    await paintRootGradient(conn, ...GRADIENT);
  } finally {
    conn.close();
  }
}
