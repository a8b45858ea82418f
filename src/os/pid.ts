/** Whether a process id names a live process. */
import { readFileSync } from "node:fs";

/** True when a process with this id exists (a zombie included): signal 0 reaches it. */
export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** True when the process exists and is not a zombie waiting to be reaped (Linux reads /proc). */
export function processRunning(pid: number): boolean {
  if (!processExists(pid)) return false;
  if (process.platform !== "linux") return true;
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}
