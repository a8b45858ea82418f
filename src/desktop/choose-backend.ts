/**
 * Which desktop backend `hangar serve` uses: `x11` (the default on Linux) or `nut` (nut-js, the
 * default on macOS and Windows, and usable on X11 too).
 */
import type { Logger } from "../common/logger.js";
import type { DesktopManagerOptions } from "./manager.js";

/** Linux and the BSDs draw with X11; macOS and Windows do not. */
const USES_X11 = process.platform !== "darwin" && process.platform !== "win32";

export const BACKEND_NAMES = ["x11", "nut"] as const;
export type BackendName = (typeof BACKEND_NAMES)[number];

export function defaultBackend(): BackendName {
  return USES_X11 ? "x11" : "nut";
}

/** The manager options that make it connect with the named backend. */
export function backendOptions(name: BackendName, log?: Logger): Partial<DesktopManagerOptions> {
  if (name === "x11") return {};
  return {
    // Loaded on first use, like the X11 backend: a server that never drives the desktop never pays for it.
    connect: async (display) => (await import("./nut/backend.js")).NutBackend.connect(display, { log }),
    // macOS and Windows have no DISPLAY; the manager only needs a name to pass on.
    ...(USES_X11 ? {} : { display: process.platform }),
  };
}
