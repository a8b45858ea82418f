/**
 * A desktop's furniture, started once the X server and window manager run: a wallpaper (a gradient,
 * `wallpaper.png` beside this module, which xwallpaper scales to the screen) and the lxpanel panel
 * (task list, clock). The container and the guest image start them (`hangar serve --panel`). Both are
 * optional: a missing program is logged and the desktop works without it. The panel ends with the X
 * server. Its menu starts programs, so with a command user (`--command-user`) it runs as that user.
 *
 * The gradient is a file made once, not drawn at each start: drawing it loaded sharp (libvips) into
 * the server at start, 13 MB of its memory for a desktop no agent has looked at yet (a warm pool's),
 * and took about half a second of a container's start on two busy cores (docs/performance.md).
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { asUser, type CommandUser, userCwd, userEnv } from "../os/command-user.js";
import { findProgram } from "../os/launch.js";
import { showX11Wallpaper } from "./wallpaper.js";

/** A 320x200 diagonal gradient from #1f3b57 to #4f7a8c (adjacent pixels differ by less than a level). */
const GRADIENT = fileURLToPath(new URL("./wallpaper.png", import.meta.url));

interface Desktop {
  env: Record<string, string>;
  /** The user the agent's programs run as, when not this process's. */
  user?: CommandUser;
}

export async function startDesktopApps(desktop: Desktop, log: (message: string) => void): Promise<void> {
  await showX11Wallpaper(GRADIENT, desktop.env).catch((err: Error) => log(`no wallpaper: ${err.message}`));
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
