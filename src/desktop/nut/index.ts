/**
 * The nut-js desktop backend (macOS, Windows; also X11).
 *
 * @example
 * const desktop = createNutBackend({ DISPLAY: ":1" });
 * await desktop.moveCursor({ x: 10, y: 20 });
 */
import type { Logger } from "../../common/logger.js";
import { NutBackend } from "./backend.js";

export { NutBackend } from "./backend.js";

/**
 * A nut-js backend for the desktop that `env` describes (on X11 its `DISPLAY`). nut-js starts on
 * the first call; `await backend.ready()` starts it now.
 */
export function createNutBackend(
  env: Record<string, string> = {},
  options: { log?: Logger } = {},
): NutBackend {
  return new NutBackend({ env, log: options.log });
}
