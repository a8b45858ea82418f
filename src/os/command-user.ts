/**
 * The command user (`hangar serve --command-user NAME`): an unprivileged account that every process
 * an agent starts runs as (`run_command`, PTYs, `launch`, OSWorld's `/execute`, envd's processes),
 * while the server keeps its own. The agent then cannot signal, trace or read the server: its
 * processes have another uid, and `/proc/<server>/environ` and the server's 0600 files are not theirs.
 *
 * A program is started through util-linux's `setpriv`, which sets the real and effective ids, the
 * account's supplementary groups (`initgroups`) and clears the capabilities before it execs the
 * program (Node's own `uid`/`gid` drop every supplementary group, and node-pty's keep the server's).
 * Its environment is the server's with the account's `HOME`, `USER` and `LOGNAME`.
 */
import { execFileSync } from "node:child_process";
import { type Stats, statSync } from "node:fs";

export interface CommandUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  /** From the user database; the working directory of a process given none, when it exists. */
  readonly home: string;
}

/**
 * The account named `name`, checked: it exists, it is not root, and this process can switch to it
 * (runs as root, on Linux, with `setpriv`). Throws an error saying which of these failed.
 */
export function resolveCommandUser(name: string): CommandUser {
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$/.test(name) || name.length > 64) {
    throw new Error(`--command-user: '${name}' is not a user name`);
  }
  if (process.platform !== "linux") throw new Error("--command-user is supported on Linux only");
  const uid = process.getuid?.();
  if (uid !== 0) {
    throw new Error(
      `--command-user ${name}: the server runs as uid ${uid}, and only root can start processes as another ` +
        "user; start hangar serve as root (it keeps running as root, the agent's processes do not)",
    );
  }
  if (!runs("setpriv", ["--version"])) {
    throw new Error("--command-user needs setpriv (util-linux), not found on PATH");
  }
  const entry = passwdEntry(name);
  if (!entry) throw new Error(`--command-user: no user named '${name}' on this system (see getent passwd)`);
  const [entryName, , uidText, gidText, , home] = entry.split(":");
  const user = { name: entryName || name, uid: Number(uidText), gid: Number(gidText), home: home || "/" };
  if (!Number.isInteger(user.uid) || !Number.isInteger(user.gid)) {
    throw new Error(`--command-user: the user database's entry of '${name}' has no numeric uid and gid`);
  }
  if (user.uid === 0) {
    throw new Error(`--command-user: '${name}' is root (uid 0); name an unprivileged user`);
  }
  return user;
}

/**
 * `[file, args]` that run `file args` as the user (with its supplementary groups, no capabilities);
 * without a user, `file args` as they are.
 */
export function asUser(
  user: CommandUser | undefined,
  file: string,
  args: readonly string[],
): [string, string[]] {
  if (!user) return [file, [...args]];
  return [
    "setpriv",
    [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--init-groups", "--inh-caps=-all", "--", file, ...args],
  ];
}

/** The environment of a process of the user: `env` with the account's home and names. */
export function userEnv(user: CommandUser, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...env, HOME: user.home, USER: user.name, LOGNAME: user.name };
}

/**
 * The working directory of a process the user starts given none: its home when it is a directory
 * the user may enter (`nobody`'s `/nonexistent` may exist, made by some program run as root), else /.
 */
export function userCwd(user: CommandUser, cwd: string | undefined): string | undefined {
  if (cwd !== undefined) return cwd;
  return enterable(user, user.home) ? user.home : "/";
}

function enterable(user: CommandUser, dir: string): boolean {
  let info: Stats;
  try {
    info = statSync(dir);
  } catch {
    return false;
  }
  if (!info.isDirectory()) return false;
  const bit = info.uid === user.uid ? 0o100 : info.gid === user.gid ? 0o010 : 0o001;
  return (info.mode & bit) !== 0;
}

function runs(file: string, args: string[]): boolean {
  try {
    execFileSync(file, args, { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

/** `getent passwd NAME`'s line (the system's user database, NSS included), or undefined. */
function passwdEntry(name: string): string | undefined {
  try {
    return execFileSync("getent", ["passwd", name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
      .split("\n")[0]
      ?.trim();
  } catch {
    return undefined;
  }
}
