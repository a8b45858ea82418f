/**
 * A desktop's furniture, started once the X server and window manager run: a wallpaper (a gradient
 * drawn here, set with xwallpaper) and the lxpanel panel (task list, clock). The container and the
 * guest image start them (`hangar serve --panel`). Both are optional: a missing program is logged
 * and the desktop works without it. The panel ends with the X server.
 */
import { spawn } from "node:child_process";
import { findProgram } from "../os/launch.js";
import { setX11Wallpaper } from "./wallpaper.js";

interface Desktop {
  width: number;
  height: number;
  env: Record<string, string>;
}

export async function startDesktopApps(desktop: Desktop, log: (message: string) => void): Promise<void> {
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${desktop.width}" height="${desktop.height}">` +
    `<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">` +
    `<stop offset="0" stop-color="#1f3b57"/><stop offset="1" stop-color="#4f7a8c"/></linearGradient></defs>` +
    `<rect width="100%" height="100%" fill="url(#g)"/></svg>`;
  await setX11Wallpaper(Buffer.from(svg), desktop.env).catch((err: Error) =>
    log(`no wallpaper: ${err.message}`),
  );
  if (!findProgram("lxpanel")) return log("no panel: lxpanel is not installed");
  const panel = spawn("lxpanel", [], { env: { ...process.env, ...desktop.env }, stdio: "ignore" });
  panel.on("error", (err) => log(`the panel did not start: ${err.message}`));
  panel.unref();
}
