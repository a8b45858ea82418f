/**
 * Paths from requests: `~` expanded (to `home`, by default the server's $HOME), made absolute
 * against the server's working directory (or `base`).
 */
import { homedir } from "node:os";
import { resolve } from "node:path";
import { CommandError } from "../common/errors.js";

export function expandPath(path: string, base?: string, home = homedir()): string {
  if (path.includes("\0"))
    throw new CommandError("invalid_params", "Invalid params: path: contains a NUL byte");
  const expanded = expandHome(path, home);
  return base === undefined ? resolve(expanded) : resolve(base, expanded);
}

/** `~` and `~/…` in `home`; any other path as it is. */
export function expandHome(path: string, home = homedir()): string {
  return path === "~" ? home : path.startsWith("~/") ? `${home}${path.slice(1)}` : path;
}
