/**
 * The nut-js desktop backend (macOS, Windows; also X11).
 *
 * @example
 * const desktop = createNutBackend({ DISPLAY: ":1" });
 * await desktop.moveCursor({ x: 10, y: 20 });
 */
import type { Logger } from "../../common/logger.js";
import type { DesktopProvider } from "../backend.js";
import { NutBackend } from "./backend.js";

export { NutBackend } from "./backend.js";

/** A nut-js backend for the desktop described by `env` (on X11: `DISPLAY`), added to the server's own environment. */
export function createNutBackend(env: Record<string, string> = {}, options: { log?: Logger } = {}): NutBackend {
  return new NutBackend({ env, log: options.log });
}

/** A provider for the server: hands out the backend once nut-js runs, else fails with `unavailable`. */
export function nutDesktopProvider(backend: NutBackend): DesktopProvider {
  return async () => {
    await backend.ready();
    return backend;
  };
}
