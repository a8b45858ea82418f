/**
 * How busy the desktop's processes are: the CPU time (`/proc/<pid>/stat`'s utime and stime) of every
 * process this one can see but itself, between two samples. In a container that is the container's
 * processes (its own PID namespace), in a VM the guest's. Read only when asked: nothing runs
 * between samples. A process that started since the last sample counts with all its time; one
 * that ended is left out.
 */
import { readdirSync, readFileSync } from "node:fs";

/** The kernel's clock ticks a second for utime and stime (USER_HZ, 100 on Linux everywhere). */
const TICKS_PER_SECOND = 100;

/** Each visible process's CPU time in ticks, this one's left out; empty where there is no /proc. */
export function processTicks(proc = "/proc"): Map<number, number> {
  const ticks = new Map<number, number>();
  let entries: string[];
  try {
    entries = readdirSync(proc);
  } catch {
    return ticks;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const stat = readFileSync(`${proc}/${entry}/stat`, "latin1");
      // The fields after the command's name, which is in parentheses and may hold anything.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks.set(Number(entry), Number(fields[11]) + Number(fields[12]));
    } catch {
      // gone meanwhile
    }
  }
  return ticks;
}

/**
 * The CPU the other processes used since the last call, in cores (1 = one core the whole time);
 * undefined at the first call (nothing to compare with yet) and where there is no /proc.
 */
export class CpuUse {
  private last: { at: number; ticks: Map<number, number> } | undefined;

  constructor(
    private readonly read: () => Map<number, number> = () => processTicks(),
    private readonly clock: () => number = () => performance.now(),
  ) {}

  sample(): number | undefined {
    const now = { at: this.clock(), ticks: this.read() };
    const last = this.last;
    this.last = now;
    if (!last || now.ticks.size === 0 || now.at - last.at < 1) return undefined;
    let used = 0;
    for (const [pid, ticks] of now.ticks) used += Math.max(0, ticks - (last.ticks.get(pid) ?? 0));
    return used / TICKS_PER_SECOND / ((now.at - last.at) / 1000);
  }
}
