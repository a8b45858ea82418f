/**
 * Which desktop backend `hangar serve` uses: `x11` (the default on Linux) or `nut` (nut-js, the
 * default on macOS and Windows, and usable on X11 too).
 */
import type { Logger } from "../common/logger.js";
import type { DesktopManagerOptions } from "./manager.js";
import { NutBackend, USES_X11 } from "./nut/backend.js";

export const BACKEND_NAMES = ["x11", "nut"] as const;
export type BackendName = (typeof BACKEND_NAMES)[number];

export function defaultBackend(): BackendName {
  return USES_X11 ? "x11" : "nut";
}

/** The manager options that make it connect with the named backend. */
export function backendOptions(name: BackendName, log?: Logger): Partial<DesktopManagerOptions> {
  if (name === "x11") return {};
  return {
    connect: (display) => NutBackend.connect(display, { log }),
    // macOS and Windows have no DISPLAY; the manager only needs a name to pass on.
    ...(USES_X11 ? {} : { display: process.platform }),
  };
}
