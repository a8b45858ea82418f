/**
 * Hibernate, resume and wake, for every runtime that can (desktops/hibernation.ts), on behalf of
 * the VM service: one hibernate or resume of a desktop at a time (two resumes at once: the second
 * finds it running), concurrent wakes of one desktop made one, the wake listeners of sleeping
 * desktops (wake-listeners.ts) opened and closed around them, and every transition told to the
 * lifecycle emitter.
 */

import type { DesktopRecord } from "../desktops/desktop-record.js";
import type { HibernationMode } from "../desktops/hibernation.js";
import { canHibernate, type DesktopRuntime, type HibernatingRuntime } from "../desktops/runtime.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { KeyedLock } from "../keyed-lock.js";
import { vmName } from "../names.js";
import type { Lifecycle } from "./lifecycle.js";
import { WakeListeners } from "./wake-listeners.js";

/** The longest a wake waits for the desktop to be ready (a disk-only resume boots its desktop). */
export const WAKE_TIMEOUT_MS = 180_000;

/** What the sleep control asks of the VM service. */
export interface SleepHost {
  locate(name: string): Promise<{ runtime: DesktopRuntime; record: DesktopRecord }>;
  find(name: string): Promise<DesktopRecord>;
  list(): Promise<DesktopRecord[]>;
  waitReady(name: string, timeoutMs: number, signal?: AbortSignal): Promise<DesktopRecord>;
  /** Readiness and listeners learn that a desktop changed. */
  changed(name: string): void;
  /** The desktop sleeps: the service's own probes of it end, before anything listens at its address. */
  stopProbing(name: string): void;
  runtimes(): DesktopRuntime[];
}

/** What `ensureAwake` answers: the desktop's record (ready, when it was woken) and whether it slept. */
export interface Awake {
  record: DesktopRecord;
  woke: boolean;
}

export class SleepControl {
  private readonly lock = new KeyedLock();
  private readonly waking = new Map<string, Promise<DesktopRecord>>();
  private readonly listeners: WakeListeners;

  constructor(
    private readonly host: SleepHost,
    private readonly lifecycle: Lifecycle,
    private readonly log: HostLog,
  ) {
    this.listeners = new WakeListeners({
      wake: async (name, why) => {
        await this.wake(name, why);
      },
      problem: (name, message) =>
        void this.log.error("A sleeping desktop cannot be woken on a request", { vm: name, error: message }),
    });
    for (const runtime of host.runtimes()) {
      if (canHibernate(runtime)) {
        runtime.onWakeRequest?.(async (name, why) => {
          await this.wake(name, why);
        });
      }
    }
  }

  /**
   * Puts a running desktop to sleep (`mode`: the runtime's default when left out); its record then.
   * `why` is told with the event when the service did it on its own (idle-watcher.ts).
   */
  async hibernate(name: string, mode?: HibernationMode, why?: string): Promise<DesktopRecord> {
    const { runtime, record } = await this.host.locate(name);
    const sleeping = capable(runtime);
    const chosen = hibernationMode(runtime, mode);
    return this.lock.run(record.name, async () => {
      const started = Date.now();
      let listening = false;
      const asleep = async () => {
        await this.listen(sleeping, record.name);
        listening = true;
      };
      try {
        await sleeping.hibernate(record.name, chosen, asleep);
      } catch (err) {
        this.failed(record, "hibernate", err);
        throw err;
      } finally {
        this.host.changed(record.name);
      }
      if (!listening) await this.listen(sleeping, record.name);
      this.lifecycle.emit({
        type: "hibernated",
        name: record.name,
        runtime: runtime.kind,
        mode: chosen,
        ms: Date.now() - started,
        ...(why ? { why } : {}),
      });
      return this.host.find(record.name);
    });
  }

  /** Wakes a hibernated desktop; a running or stopped one is a 409, nothing changed. */
  async resume(name: string): Promise<DesktopRecord> {
    const { runtime, record } = await this.host.locate(name);
    const sleeping = capable(runtime);
    const ms = await this.lock.run(record.name, () => this.resumeNow(sleeping, record));
    this.lifecycle.emit({ type: "resumed", name: record.name, runtime: runtime.kind, ms });
    return this.host.find(record.name);
  }

  /**
   * The desktop awake: a sleeping one is resumed (woken by traffic: logged, and told as `woke`)
   * and, when it slept on disk, waited for until its server answers (with its memory kept it
   * answers at once); a running one is answered as it is. Wakes of one desktop at once
   * are one. A stopped desktop is a 409: there is nothing to wake.
   */
  async ensureAwake(name: string, why = "a request"): Promise<Awake> {
    const key = vmName(name);
    const inflight = this.waking.get(key);
    if (inflight) return { record: await inflight, woke: true };
    const record = await this.host.find(key);
    if (record.status === "running") return { record, woke: false };
    if (record.status !== "hibernated") {
      throw new HostError(
        "conflict",
        `${record.name} is ${record.status}: there is nothing to wake (run it)`,
      );
    }
    return { record: await this.wake(record.name, why), woke: true };
  }

  /** Opens the wake listeners of every sleeping desktop; once at start. */
  async recover() {
    const records = await this.host.list().catch(() => [] as DesktopRecord[]);
    for (const record of records.filter((r) => r.status === "hibernated")) {
      const runtime = this.host.runtimes().find((r) => r.kind === record.runtime);
      if (runtime && canHibernate(runtime)) await this.listen(runtime, record.name);
    }
  }

  /** The desktop was stopped or deleted: nothing listens for it any more. */
  async forget(name: string) {
    await this.listeners.drop(name);
  }

  /** Waits for the wakes under way (their logs and events), then stops listening for anyone. */
  async close() {
    await Promise.allSettled([...this.waking.values()]);
    await this.listeners.close();
  }

  private wake(name: string, why: string): Promise<DesktopRecord> {
    const inflight = this.waking.get(name);
    if (inflight) return inflight;
    const waking = (async () => {
      const started = Date.now();
      const { runtime, record } = await this.host.locate(name);
      const sleeping = capable(runtime);
      const kept = await this.lock.run(record.name, async () => {
        const now = await this.host.find(record.name);
        if (now.status !== "hibernated") return undefined;
        await this.resumeNow(sleeping, record);
        return now.hibernation;
      });
      // With its memory kept, the desktop answers as it did when it fell asleep: no probe to wait
      // for. From disk it starts again, and is waited for until its server answers.
      const ready =
        kept === "memory" || kept === "paused"
          ? await this.host.find(record.name)
          : await this.host.waitReady(record.name, WAKE_TIMEOUT_MS);
      const resumed = kept !== undefined;
      // Awake already (another wake, a resume, or a start under way): nothing woke it here.
      if (!resumed) return ready;
      const ms = Date.now() - started;
      await this.log.info("Desktop woke on a request", { vm: record.name, runtime: runtime.kind, why, ms });
      this.lifecycle.emit({ type: "woke", name: record.name, runtime: runtime.kind, ms, why });
      return ready;
    })();
    this.waking.set(name, waking);
    const forget = () => {
      if (this.waking.get(name) === waking) this.waking.delete(name);
    };
    waking.then(forget, forget);
    return waking;
  }

  /** Resumes under the lock; the listeners close just before the desktop takes its ports. */
  private async resumeNow(sleeping: HibernatingRuntime, record: DesktopRecord): Promise<number> {
    const started = Date.now();
    try {
      await sleeping.resume(record.name, () => this.listeners.release(record.name));
    } catch (err) {
      this.failed(record, "resume", err);
      // Still asleep (a resume that fails leaves it so): reachable for the next wake.
      const now = await this.host.find(record.name).catch(() => undefined);
      if (now?.status === "hibernated") await this.listen(sleeping, record.name);
      throw err;
    } finally {
      this.host.changed(record.name);
    }
    return Date.now() - started;
  }

  private async listen(runtime: HibernatingRuntime, name: string) {
    // A readiness probe that reached the listener would wake the desktop just put to sleep.
    this.host.stopProbing(name);
    const addresses = await runtime.wakeAddresses(name).catch(() => []);
    if (addresses.length > 0) await this.listeners.hold(name, addresses);
  }

  private failed(record: DesktopRecord, operation: "hibernate" | "resume", err: unknown) {
    if (err instanceof HostError && (err.kind === "conflict" || err.kind === "invalid_params")) return;
    const error = (err as Error).message;
    void this.log.error(`A desktop failed to ${operation}`, { vm: record.name, error });
    this.lifecycle.emit({ type: "failed", name: record.name, runtime: record.runtime, operation, error });
  }
}

/**
 * The mode a desktop of `runtime` hibernates in when asked for `mode` (its default when left out);
 * a clear 400 naming the runtime's modes for one it does not have, or for a runtime that cannot.
 */
export function hibernationMode(runtime: DesktopRuntime, mode?: HibernationMode): HibernationMode {
  const { modes } = capable(runtime).hibernation;
  const chosen = mode ?? modes[0];
  if (!modes.includes(chosen)) {
    throw new HostError(
      "invalid_params",
      `A ${runtime.kind} desktop hibernates with ${modes.map((m) => `'${m}'`).join(" or ")}, not '${chosen}'`,
    );
  }
  return chosen;
}

/** The runtime as one that hibernates; a clear 400 for one that cannot. */
function capable(runtime: DesktopRuntime): HibernatingRuntime {
  if (!canHibernate(runtime)) {
    throw new HostError("not_supported", `${runtime.kind} desktops cannot hibernate`);
  }
  return runtime;
}
