/** Whether processes are still there, for tests of what kills them. */
import { readdirSync, readFileSync } from "node:fs";
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

/** A process seen in /proc: its id, its parent's and its command line (arguments joined by spaces). */
export interface ProcessEntry {
  pid: number;
  ppid: number;
  args: string;
}

/** Every live process under `root` (children, grandchildren, …), zombies left out. */
export function descendants(root: number): ProcessEntry[] {
  const all: ProcessEntry[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (state === "Z") continue;
      const args = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ").trim();
      all.push({ pid: Number(name), ppid: Number(ppid), args });
    } catch {
      // gone meanwhile
    }
  }
  const found: ProcessEntry[] = [];
  const parents = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const entry of all) {
      if (parents.has(entry.ppid) && !parents.has(entry.pid)) {
        parents.add(entry.pid);
        found.push(entry);
        grew = true;
      }
    }
  }
  return found;
}

/** True while the process runs: not gone, and not a zombie waiting for its parent to reap it. */
export function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/** The processes whose command line includes `text` (zombies too), with their parent and state. */
export function processesNamed(text: string): { pid: number; ppid: number; state: string }[] {
  const found: { pid: number; ppid: number; state: string }[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!readFileSync(`/proc/${name}/cmdline`, "utf8").includes(text)) continue;
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      found.push({ pid: Number(name), ppid: Number(ppid), state });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** The real uid of a process (its `/proc/<pid>/status` line `Uid:`). */
export function uidOf(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("Uid:"));
  return Number(line?.split(/\s+/)[1]);
}
