/**
 * How a container desktop sleeps (docs/containers.md#hibernate-and-resume). CRIU cannot checkpoint
 * on this kernel, so there are two ways, both measured there:
 *
 * - `paused`: the engine's freezer (`docker pause`): every process stops where it is, the CPU is
 *   free, the memory stays held; `unpause` is instant and everything is as it was. The engine's
 *   own state (`Paused`) is the record.
 * - `disk`: the container is stopped with its writable layer (home, /tmp, everything written)
 *   and started again on resume: files are kept, processes and their memory are not.
 *
 * A mark in the desktop's secrets directory says when and how it went to sleep; for `disk` it is
 * written before the stop (the intent): a stopped container with the mark is hibernated, a running
 * one with a mark left by a killed service is running (the mark goes at start).
 *
 * A paused desktop's ports are still the engine's, so a connection to them is taken by the kernel
 * and waits; `PausedWatch` sees it waiting (a listening socket with a backlog, or a connection
 * with unread bytes, on one of the desktop's ports in its network namespace, from /proc) and asks
 * for the desktop to be woken. It needs the engine on this host (`unix://`).
 */
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { writeFileAtomic } from "../../common/atomic-write.js";

const MARK_FILE = ".hibernation.json";
const markSchema = z.object({ mode: z.enum(["paused", "disk"]), at: z.string() });
export type SleepMark = z.infer<typeof markSchema>;

export async function readMark(secretsDir: string): Promise<SleepMark | undefined> {
  try {
    return markSchema.parse(JSON.parse(await readFile(join(secretsDir, MARK_FILE), "utf8")));
  } catch {
    return undefined;
  }
}

export function writeMark(secretsDir: string, mode: SleepMark["mode"]) {
  const mark: SleepMark = { mode, at: new Date().toISOString() };
  return writeFileAtomic(join(secretsDir, MARK_FILE), `${JSON.stringify(mark)}\n`, { mode: 0o644 });
}

export function clearMark(secretsDir: string) {
  return rm(join(secretsDir, MARK_FILE), { force: true });
}

/** How often paused desktops are looked at for a waiting request. */
const WATCH_INTERVAL_MS = 100;
const LISTEN = "0A";
const ESTABLISHED = "01";

interface Watched {
  pid: number;
  ports: Set<number>;
}

/** Watches paused desktops for requests waiting on their ports; calls `wake` for each (once per pause). */
export class PausedWatch {
  private readonly desktops = new Map<string, Watched>();
  private timer?: NodeJS.Timeout;

  constructor(private readonly wake: (name: string) => void) {}

  watch(name: string, pid: number, ports: number[]) {
    if (!pid) return;
    this.desktops.set(name, { pid, ports: new Set(ports) });
    this.timer ??= setInterval(() => void this.look(), WATCH_INTERVAL_MS);
    this.timer.unref();
  }

  unwatch(name: string) {
    this.desktops.delete(name);
    if (this.desktops.size === 0) this.stop();
  }

  stop() {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private async look() {
    for (const [name, watched] of [...this.desktops]) {
      if (await waiting(watched)) {
        this.desktops.delete(name);
        this.wake(name);
      }
    }
    if (this.desktops.size === 0) this.stop();
  }
}

/** Whether a connection waits on one of the ports, in the network namespace of `pid`. */
async function waiting({ pid, ports }: Watched): Promise<boolean> {
  for (const table of ["tcp", "tcp6"]) {
    const text = await readFile(`/proc/${pid}/net/${table}`, "utf8").catch(() => "");
    for (const line of text.split("\n").slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue …
      const [, local, , state, queues] = line.trim().split(/\s+/);
      if (!local || !queues) continue;
      const port = Number.parseInt(local.split(":")[1] ?? "", 16);
      if (!ports.has(port) || (state !== LISTEN && state !== ESTABLISHED)) continue;
      // A listening socket's rx_queue is its accept backlog; a connection's, the bytes unread.
      if (Number.parseInt(queues.split(":")[1] ?? "0", 16) > 0) return true;
    }
  }
  return false;
}
