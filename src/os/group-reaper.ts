/**
 * The process groups of the shells this process spawned (each in a group of its own, so that a
 * timeout kills the command and what it started) die with this process, however it ends: `kill -9`
 * runs no handler. A reaper, one small shell started at the first spawn, is told each group as it
 * starts (`+PGID`) and ends (`-PGID`) on its stdin; when that pipe ends, because this process is
 * gone, it kills every group still listed. (Warm shells have their launcher for that:
 * shell-launcher.sh.) Linux and macOS; elsewhere nothing is done.
 */
import { type ChildProcess, spawn } from "node:child_process";

const REAPER = `
groups=" "
while read -r line; do
  case $line in
  +*) groups="$groups\${line#+} " ;;
  -*) groups=$(printf '%s' "$groups" | sed "s/ \${line#-} / /") ;;
  esac
done
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
`;

/** Its `$0`: what `ps` shows of it beside the script. */
export const REAPER_NAME = "hangar-group-reaper";

let reaper: ChildProcess | undefined;

function started(): ChildProcess | undefined {
  if (process.platform === "win32") return undefined;
  if (reaper && reaper.exitCode === null && reaper.signalCode === null && reaper.stdin?.writable)
    return reaper;
  try {
    const child = spawn("/bin/sh", ["-c", REAPER, REAPER_NAME], {
      stdio: ["pipe", "ignore", "ignore"],
      detached: true,
    });
    child.on("error", () => undefined);
    child.stdin?.on("error", () => undefined);
    // Neither keeps this process alive.
    child.unref();
    (child.stdin as unknown as { unref?: () => void })?.unref?.();
    reaper = child;
    return child;
  } catch {
    return undefined;
  }
}

/** Has group `pgid` killed if this process ends while the group is still listed. */
export function reapWithUs(pgid: number | undefined) {
  if (pgid !== undefined) started()?.stdin?.write(`+${pgid}\n`);
}

/** The group has ended (its leader and pipes are closed): no longer listed. */
export function reaped(pgid: number | undefined) {
  if (pgid !== undefined && reaper?.stdin?.writable) reaper.stdin.write(`-${pgid}\n`);
}
