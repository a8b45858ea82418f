/** envd's access token from a file (`--envd-token-file`): read by the command line, never from its arguments. */
import { readFileSync, statSync } from "node:fs";

/**
 * The access token in `path` (`--envd-token-file`): its first line, which must be a non-empty run of
 * printable ASCII without spaces (it travels in a header). A file anyone may read is refused.
 */
export function readTokenFile(path: string): string {
  let text: string;
  try {
    if (statSync(path).mode & 0o004) {
      throw new Error(`${path} can be read by every user of the system: chmod o-r it (0600 or 0640)`);
    }
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new Error(`--envd-token-file: ${(err as Error).message}`);
  }
  const token = text.split(/\r?\n/)[0].trim();
  if (!/^[\x21-\x7e]{1,4096}$/.test(token)) {
    throw new Error(
      `--envd-token-file: ${path} must hold the token on its first line (printable ASCII, no spaces)`,
    );
  }
  return token;
}
