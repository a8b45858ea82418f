/** Whether processes are still there, for tests of what kills them. */
import { setTimeout as sleep } from "node:timers/promises";

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls until the process is gone or the time is up; true when it is gone. */
export async function waitUntilGone(pid: number, timeoutMs = 3000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid) && Date.now() < deadline) await sleep(20);
  return !isAlive(pid);
}
