/**
 * V8's young generation while a program loads. Reading and compiling a few hundred modules allocates
 * quickly, and at each scavenge V8 doubles the semi-spaces (1 MiB → 8 MiB → 16 MiB), which stay
 * committed once touched: about 7 MB of the computer server's resident memory right after start,
 * for nothing it keeps (its heap holds about 13 MB in use). Keeping the growth factor at 1 while
 * loading leaves them at 1 MiB; once the program serves, the default growth comes back, so that
 * megabyte replies and bodies grow them as before (up to `--max-semi-space-size`).
 *
 * A growth factor can be changed at run time (V8 reads it at each growth); the size limits cannot.
 * No module is imported here: `bin/hangar.js` calls this before it loads the program.
 */
import { setFlagsFromString } from "node:v8";

const FLAG = "--semi-space-growth-factor";
/** V8's default (`node --v8-options`). */
const DEFAULT_FACTOR = 2;

let held = false;

/** Keeps the young generation from growing, unless Node was started with a growth factor of its own. */
export function holdYoungGeneration(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions = process.env.NODE_OPTIONS,
) {
  if (held || [...execArgv, nodeOptions ?? ""].some((arg) => arg.includes(FLAG))) return;
  setFlagsFromString(`${FLAG}=1`);
  held = true;
}

/** Lets it grow again: called once the program has loaded and serves. */
export function releaseYoungGeneration() {
  if (!held) return;
  setFlagsFromString(`${FLAG}=${DEFAULT_FACTOR}`);
  held = false;
}

/** Whether the growth is held (for the tests). */
export const youngGenerationHeld = () => held;
