/**
 * What the Python that OSWorld's routes run needs: Hangar's `pyautogui` module on `PYTHONPATH`, a
 * `python` next to `python3` on `PATH`, and how to call this server back. The way back (URL, and in
 * cloud mode the container name, a key the server made for its children and the certificate to
 * trust) is written to a private file (mode 0600 in a 0700 directory, the command user's when there
 * is one, since the children run as that user); children get the file's path
 * in `HANGAR_PYAUTOGUI_CONNECTION`, never a key in their arguments or environment. The key is valid
 * from loopback only. Directories left by a server that was killed are removed at the next start.
 */
import { randomBytes } from "node:crypto";
import { chownSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { PACKAGE_ROOT } from "../../../common/version.js";
import type { CommandUser } from "../../../os/command-user.js";
import { processExists } from "../../../os/pid.js";

export const PYTHON_DIR = join(PACKAGE_ROOT, "python");
const PREFIX = "hangar-pyautogui-";

export interface PythonEnvOptions {
  /** The computer server's own URL (`POST /cmd`). */
  url: string;
  /** Cloud mode: the container name and a function that makes the server accept a new key. */
  cloud?: { containerName: string; addLocalKey(key: string): void };
  /** The server's TLS certificate (PEM), which children are to trust for `url`. */
  certificate?: Buffer;
  /** The user the children run as (`--command-user`): the directory and its files are theirs. */
  user?: CommandUser;
}

export interface PythonEnv {
  /** Variables added to every child's environment. */
  readonly env: Record<string, string>;
  close(): void;
}

export function preparePythonEnv(options: PythonEnvOptions): PythonEnv {
  sweepStale();
  const dir = mkdtempSync(join(tmpdir(), `${PREFIX}${process.pid}-`));
  const connection: Record<string, string> = { url: loopbackUrl(options.url) };
  if (options.cloud) {
    const key = randomBytes(32).toString("base64url");
    options.cloud.addLocalKey(key);
    connection.container_name = options.cloud.containerName;
    connection.api_key = key;
  }
  if (options.certificate) {
    connection.cafile = join(dir, "server.pem");
    writeFileSync(connection.cafile, options.certificate, { mode: 0o600 });
  }
  const file = join(dir, "connection.json");
  writeFileSync(file, JSON.stringify(connection), { mode: 0o600 });
  const { user } = options;
  if (user) {
    for (const path of [dir, file, connection.cafile]) if (path) chownSync(path, user.uid, user.gid);
  }
  const inherited = process.env.PYTHONPATH;
  // HANGAR_PYAUTOGUI=system: the PyAutoGUI installed in the desktop's Python instead of Hangar's.
  const hangarFirst = process.env.HANGAR_PYAUTOGUI !== "system";
  const pythonPath = [hangarFirst ? PYTHON_DIR : undefined, inherited].filter(Boolean).join(delimiter);
  return {
    env: {
      HANGAR_PYAUTOGUI_CONNECTION: file,
      ...(pythonPath ? { PYTHONPATH: pythonPath } : {}),
      PATH: `${join(PYTHON_DIR, "bin")}${delimiter}${process.env.PATH ?? "/usr/bin:/bin"}`,
      PYTHONIOENCODING: "utf-8",
    },
    close: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A server listening on every address is called back on loopback. */
function loopbackUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.hostname === "0.0.0.0") parsed.hostname = "127.0.0.1";
  if (parsed.hostname === "[::]") parsed.hostname = "[::1]";
  return parsed.origin;
}

/** Removes the directories of servers that are gone (a `kill -9` leaves them). */
function sweepStale() {
  let names: string[];
  try {
    names = readdirSync(tmpdir());
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(PREFIX)) continue;
    const pid = Number(name.slice(PREFIX.length).split("-")[0]);
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !processExists(pid)) {
      rmSync(join(tmpdir(), name), { recursive: true, force: true });
    }
  }
}
