/** The package version, read once from the nearest package.json above this file. */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The package's root directory, from `src/` (tests) and from `dist/src/` (the built CLI) alike. */
export const PACKAGE_ROOT = (() => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("package.json not found above the hangar sources");
    dir = parent;
  }
  return dir;
})();

export const PACKAGE_VERSION: string = JSON.parse(
  readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8"),
).version;

/** The wire protocol version cua's clients see in `version`. */
export const PROTOCOL_VERSION = 1;
