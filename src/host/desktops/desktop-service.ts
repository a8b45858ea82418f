/**
 * What the VM routes ask for, in one place: find, list, create, clone, update, delete, run, stop
 * and wait for desktops, whichever runtime backs them (desktops/runtime.ts). A name is unique
 * across runtimes; each request goes to the runtime that has the desktop, a new desktop to the
 * runtime it asks for (or the service's default). Readiness is added to every record here.
 */
import type { Readable } from "node:stream";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import type { PullRecord, VmActivity } from "../images/vm-activity.js";
import { KeyedLock } from "../keyed-lock.js";
import { vmName } from "../names.js";
import type {
  CloneRequest,
  CreateRequest,
  ForkRequest,
  RunRequest,
  StopRequest,
  UpdateRequest,
} from "../requests.js";
import { Lifecycle } from "../sleep/lifecycle.js";
import { type Awake, hibernationMode, SleepControl } from "../sleep/sleep-control.js";
import type { DesktopRecord } from "./desktop-record.js";
import type { HibernationMode } from "./hibernation.js";
import { ReadinessTracker } from "./readiness.js";
import {
  canSnapshot,
  type DesktopRuntime,
  type LogOptions,
  type RuntimeImage,
  type RuntimeKind,
  type RuntimeRecord,
  type SnapshotRecord,
  type SnapshottingRuntime,
  type StopOutcome,
} from "./runtime.js";
import { warmUp } from "./warm-up.js";

export type { DesktopRecord } from "./desktop-record.js";

/** The longest `waitReady` waits (a cold boot under software emulation takes about a minute). */
export const MAX_WAIT_MS = 15 * 60_000;
/** `waitReady` reads the record at least this often, told of a change or not. */
const RELOOK_MS = 5000;
/** How long a desktop's warm-up before its memory snapshot may take (a guest under TCG: seconds). */
const SNAPSHOT_WARM_UP_MS = 10_000;

export class DesktopService {
  private readonly byKind: Map<RuntimeKind, DesktopRuntime>;
  private readonly readiness: ReadinessTracker;
  /** Creations and clones hold their new name, so two runtimes never get one name at once. */
  private readonly names = new KeyedLock();
  private readonly listeners: ((name: string) => void)[] = [];
  /** When each runtime that failed to list last said so in the log (one line a minute). */
  private readonly listFailures = new Map<RuntimeKind, number>();
  /** Every desktop's transitions (created, started, hibernated, woke …), for whoever watches them. */
  readonly lifecycle = new Lifecycle();
  private readonly sleep: SleepControl;
  /** What other services add to every record (its network policy). */
  private readonly additions: ((record: RuntimeRecord) => object)[] = [];

  constructor(
    runtimes: DesktopRuntime[],
    readonly defaultRuntime: RuntimeKind,
    private readonly activity: Pick<VmActivity, "pulling" | "pullFailure">,
    private readonly log: HostLog,
  ) {
    this.byKind = new Map(runtimes.map((runtime) => [runtime.kind, runtime]));
    if (!this.byKind.has(defaultRuntime)) {
      throw new Error(`the default runtime '${defaultRuntime}' is not available`);
    }
    this.readiness = new ReadinessTracker(
      (record) => this.runtime(record.runtime).find(record.name),
      undefined,
      (record, ms) => {
        this.byKind.get(record.runtime)?.ready?.(record.name);
        this.lifecycle.emit({ type: "ready", name: record.name, runtime: record.runtime, ms });
      },
    );
    for (const runtime of runtimes) {
      runtime.onChange?.((name) => {
        this.readiness.notify(name);
        for (const listener of this.listeners) listener(name);
      });
    }
    this.sleep = new SleepControl(
      {
        locate: (name) =>
          this.locateOrFail(name).then(({ runtime, record }) => ({
            runtime,
            record: this.withReadiness(record),
          })),
        find: (name) => this.find(name),
        list: () => this.list(),
        waitReady: (name, ms, signal) => this.waitReady(name, ms, signal),
        changed: (name) => this.readiness.notify(name),
        stopProbing: (name) => this.readiness.stopProbing(name),
        runtimes: () => [...this.byKind.values()],
      },
      this.lifecycle,
      log,
    );
  }

  /** Calls `listener` with a desktop's name when its runtime says it changed (started, stopped, vanished). */
  onChange(listener: (name: string) => void) {
    this.listeners.push(listener);
  }

  /** Adds keys of another service's to every record (`network`, egress/egress-service.ts). */
  addToRecords(addition: (record: RuntimeRecord) => object) {
    this.additions.push(addition);
  }

  /** The runtimes this service has, the default first. */
  get kinds(): RuntimeKind[] {
    return [this.defaultRuntime, ...[...this.byKind.keys()].filter((k) => k !== this.defaultRuntime)];
  }

  /**
   * Every desktop of every runtime. A runtime that cannot answer (its engine is gone) is left out
   * of the list and said so in the log, so that the others' desktops stay manageable; with one
   * runtime, its failure is the answer.
   */
  async list(storage?: string): Promise<DesktopRecord[]> {
    const runtimes = [...this.byKind.values()];
    const lists = await Promise.all(
      runtimes.map((runtime) =>
        runtime.list(storage).catch((err: Error) => {
          if (runtimes.length === 1 || !(err instanceof HostError) || err.kind !== "unavailable") throw err;
          const last = this.listFailures.get(runtime.kind) ?? 0;
          if (Date.now() - last > 60_000) {
            this.listFailures.set(runtime.kind, Date.now());
            void this.log.error("A runtime cannot list its desktops", {
              runtime: runtime.kind,
              error: err.message,
            });
          }
          return [];
        }),
      ),
    );
    return lists.flat().map((record) => this.withReadiness(record));
  }

  /** How many desktops run (or are being started). */
  async runningCount(): Promise<number> {
    return (await this.list()).filter((vm) => vm.status === "running").length;
  }

  /**
   * A desktop's record, or lume's record of a pull creating it. `name` is as requested: a pull is
   * known by it, and a failed pull is reported where no desktop of that name answers.
   */
  async get(name: string, storage?: string): Promise<DesktopRecord | PullRecord> {
    const pulling = this.activity.pulling(name);
    if (pulling) return pulling;
    try {
      return await this.find(name, storage);
    } catch (err) {
      throw this.activity.pullFailure(name) ?? err;
    }
  }

  /** The desktop's record, from whichever runtime has it; a clear 400 when none has. */
  async find(name: string, storage?: string): Promise<DesktopRecord> {
    const found = await this.locate(vmName(name), storage);
    if (!found) throw notFound(vmName(name));
    return this.withReadiness(found.record);
  }

  /**
   * Waits until the desktop is ready (its computer server answered), then gives its record.
   * Fails at once when the desktop is not running and not starting, or stops while waited for.
   */
  async waitReady(name: string, timeoutMs: number, signal?: AbortSignal): Promise<DesktopRecord> {
    const deadline = AbortSignal.timeout(Math.min(timeoutMs, MAX_WAIT_MS));
    const stop = signal ? AbortSignal.any([deadline, signal]) : deadline;
    for (;;) {
      // Listen before reading, so a change between the read and the wait is not missed.
      const woken = new AbortController();
      // … and look again after a while even if nothing was told (a runtime's watch may miss a change).
      const next = this.readiness.next(
        AbortSignal.any([stop, woken.signal, AbortSignal.timeout(RELOOK_MS)]),
        vmName(name),
      );
      const record = await this.find(name).catch((err) => {
        woken.abort();
        throw err;
      });
      if (record.ready) {
        woken.abort();
        return record;
      }
      if (record.status !== "running") {
        woken.abort();
        const why = record.lastError ? `: ${record.lastError}` : "";
        throw new HostError("failed", `Virtual machine ${record.name} is not running${why}`);
      }
      if (stop.aborted) {
        woken.abort();
        if (signal?.aborted) throw new HostError("cancelled", "The wait was cancelled");
        throw new HostError(
          "unavailable",
          `Virtual machine ${record.name} was not ready after ${Number((timeoutMs / 1000).toFixed(1))} s ` +
            "(it runs, but its computer server does not answer yet)",
        );
      }
      await next;
    }
  }

  async create(request: CreateRequest & { runtime?: RuntimeKind }) {
    const name = vmName(request.name);
    const runtime = this.runtime(request.runtime ?? this.defaultRuntime);
    await this.names.run(name, async () => {
      await this.assertFree(name);
      await runtime.create({ ...request, name });
    });
    this.readiness.notify(name);
    this.lifecycle.emit({ type: "created", name, runtime: runtime.kind });
    return { name, runtime: runtime.kind };
  }

  async remove(name: string, storage?: string) {
    const { runtime, record } = await this.locateOrFail(name, storage);
    await runtime.remove(record.name, storage);
    await this.sleep.forget(record.name);
    this.readiness.notify(record.name);
    this.lifecycle.emit({ type: "deleted", name: record.name, runtime: runtime.kind });
  }

  async clone(request: CloneRequest) {
    const { runtime } = await this.locateOrFail(request.name, request.sourceLocation);
    const newName = vmName(request.newName);
    await this.names.run(newName, async () => {
      // A name taken in the source's own runtime is that runtime's to refuse, in its words.
      await this.assertFree(newName, runtime);
      await runtime.clone({ ...request, newName });
    });
    return { name: newName, runtime: runtime.kind };
  }

  async update(name: string, request: UpdateRequest) {
    // `storage` names where the VM should be: found there, it stays; found elsewhere, it moves.
    const found = (await this.locate(vmName(name), request.storage)) ?? (await this.locate(vmName(name)));
    if (!found) throw notFound(vmName(name));
    await found.runtime.update(found.record.name, request);
  }

  /** Starts the desktop; a hibernated one is resumed (as `virsh start` does after a managed save). */
  async run(name: string, request: RunRequest) {
    const { runtime, record } = await this.locateOrFail(name, request.storage);
    if (record.status === "hibernated") return this.sleep.resume(record.name);
    await runtime.run(record.name, request);
    this.readiness.notify(record.name);
    this.lifecycle.emit({ type: "started", name: record.name, runtime: runtime.kind });
    // Waiting for it keeps its readiness probed, so that `ready` is told with nobody asking.
    void this.waitReady(record.name, MAX_WAIT_MS).catch(() => undefined);
    return record;
  }

  /** Stops the desktop; a hibernated one gives up its saved state and is stopped. */
  async stop(name: string, request: StopRequest = {}): Promise<StopOutcome> {
    const { runtime, record } = await this.locateOrFail(name, request.storage);
    if (record.status === "hibernated") await this.sleep.forget(record.name);
    const outcome = await runtime.stop(record.name, request);
    this.readiness.notify(record.name);
    this.lifecycle.emit({ type: "stopped", name: record.name, runtime: runtime.kind });
    return outcome;
  }

  /**
   * Puts a running desktop to sleep, its identity kept (desktops/hibernation.ts); `mode` is the
   * runtime's default when left out. A desktop that does not run is a 409, nothing changed.
   */
  hibernate(name: string, mode?: HibernationMode, why?: string): Promise<DesktopRecord> {
    return this.sleep.hibernate(name, mode, why);
  }

  /** Wakes a hibernated desktop; its record once it runs. A running or stopped one is a 409. */
  resume(name: string): Promise<DesktopRecord> {
    return this.sleep.resume(name);
  }

  /**
   * The desktop awake, for whatever forwards requests to it: a hibernated desktop is resumed
   * (`woke: true`; one that slept on disk is waited for until its server answers, one that kept
   * its memory answers at once), a running one answered at once. One wake per desktop at a time.
   * A stopped desktop is a 409.
   */
  ensureAwake(name: string, why?: string): Promise<Awake> {
    return this.sleep.ensureAwake(name, why);
  }

  async logs(name: string, options: LogOptions): Promise<Readable> {
    const { runtime, record } = await this.locateOrFail(name);
    return runtime.logs(record.name, options);
  }

  /** A snapshot of the desktop (docs/host.md): its whole state when it runs, its disk when stopped. */
  async snapshot(name: string, snapshot: string): Promise<SnapshotRecord> {
    const { runtime, record } = await this.locateOrFail(name);
    const snapshots = snapshotting(runtime);
    if (snapshots.snapshots.running === "memory") await this.warmBeforeSnapshot(record);
    return snapshots.snapshot(record.name, snapshot);
  }

  /**
   * A memory snapshot keeps the computer server as it is. Taken right after the server answered its
   * first-use screenshots (warm-up.ts), every restore and fork of it starts with the X connection,
   * the capture's buffers (which an idle server lets go after 5 s) and the encoders' code at hand;
   * taken later, each resumed desktop pays for them again, under an emulated CPU where there is no
   * KVM. Only a desktop that counts as ready is warmed, once: a screenshot that fails is logged,
   * and the snapshot is taken all the same.
   */
  private async warmBeforeSnapshot(record: RuntimeRecord) {
    if (record.status !== "running" || !this.readiness.of(record).ready) return;
    const started = performance.now();
    try {
      if ((await warmUp(record, SNAPSHOT_WARM_UP_MS, { retry: false })) === "warm") {
        await this.log.info("Desktop warmed for its snapshot", {
          vm: record.name,
          ms: Math.round(performance.now() - started),
        });
      }
    } catch (err) {
      await this.log.error("Desktop not warmed for its snapshot; taking it as it is", {
        vm: record.name,
        error: (err as Error).message,
      });
    }
  }

  async listSnapshots(name: string): Promise<SnapshotRecord[]> {
    const { runtime, record } = await this.locateOrFail(name);
    return snapshotting(runtime).listSnapshots(record.name);
  }

  async deleteSnapshot(name: string, snapshot: string) {
    const { runtime, record } = await this.locateOrFail(name);
    await snapshotting(runtime).deleteSnapshot(record.name, snapshot);
  }

  /** Puts the desktop back in the snapshot's state; its record once it runs again. */
  async restore(name: string, snapshot: string): Promise<DesktopRecord> {
    const { runtime, record } = await this.locateOrFail(name);
    await snapshotting(runtime).restore(record.name, snapshot);
    this.readiness.notify(record.name);
    return this.find(record.name);
  }

  /** New desktops from the snapshot: `names`, or `count` of them named `<prefix>-1`…; their names. */
  async fork(name: string, request: ForkRequest): Promise<string[]> {
    const { runtime, record } = await this.locateOrFail(name);
    const snapshots = snapshotting(runtime);
    const prefix = request.prefix ?? `${record.name}-fork`;
    const names = (
      request.names ?? Array.from({ length: request.count ?? 0 }, (_, i) => `${prefix}-${i + 1}`)
    ).map((n) => vmName(n));
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice) throw new HostError("invalid_params", `The fork name ${twice} is given twice`);
    await this.names.run(names, async () => {
      for (const n of names) await this.assertFree(n);
      await snapshots.fork(record.name, request.snapshot, names);
    });
    this.readiness.notify();
    return names;
  }

  /** Pulls an image into a runtime that makes desktops from images (a 400 for one that does not). */
  async pullImage(kind: RuntimeKind, reference: string) {
    const runtime = this.runtime(kind);
    if (!runtime.pullImage) {
      throw new HostError(
        "invalid_params",
        `The ${kind} runtime does not make desktops from images: leave runtime out to pull a VM image`,
      );
    }
    await runtime.pullImage(reference);
  }

  /** The images of every runtime that has its own (an engine that cannot be reached is left out). */
  async runtimeImages(): Promise<RuntimeImage[]> {
    const lists = await Promise.all(
      [...this.byKind.values()].map((runtime) => runtime.listImages?.().catch(() => []) ?? []),
    );
    return lists.flat();
  }

  /** Puts right what a killed service left, in every runtime; once at start. */
  async recover() {
    for (const runtime of this.byKind.values()) {
      await runtime.recover().catch((err: Error) =>
        this.log.error("Cannot recover the desktops of a runtime", {
          runtime: runtime.kind,
          error: err.message,
        }),
      );
    }
    // Running desktops are probed from now on, so that they read as ready before anyone asks.
    await this.list().catch(() => undefined);
    await this.sleep.recover();
  }

  /** Waits for every start in progress (tests and shutdown). */
  async settled() {
    await Promise.all([...this.byKind.values()].map((runtime) => runtime.settled()));
  }

  async close() {
    await this.sleep.close();
    this.readiness.close();
    await Promise.all([...this.byKind.values()].map((runtime) => runtime.close()));
  }

  /** The runtime of this kind; a clear 400 when the service has none. */
  /**
   * Checks that desktops of runtime `kind` (default: the default runtime) can hibernate in `mode`:
   * a clear 400 naming the modes they have otherwise.
   */
  assertHibernationMode(mode: HibernationMode, kind: RuntimeKind = this.defaultRuntime) {
    hibernationMode(this.runtime(kind), mode);
  }

  runtime(kind: RuntimeKind): DesktopRuntime {
    const runtime = this.byKind.get(kind);
    if (!runtime) {
      throw new HostError(
        "invalid_params",
        `Runtime '${kind}' is not available here (available: ${this.kinds.join(", ")})` +
          (kind === "container"
            ? ": start the host service with --container-engine unix:///path/to/engine.sock (Docker's or podman's)"
            : ""),
      );
    }
    return runtime;
  }

  private withReadiness(record: RuntimeRecord): DesktopRecord {
    const added = this.additions.map((addition) => addition(record));
    return Object.assign({ ...record, ...this.readiness.of(record) }, ...added);
  }

  /**
   * The runtime that has the desktop. A runtime that cannot be asked (its engine is gone) is
   * passed over; when no other has the desktop, its failure is the answer (it may be there).
   */
  private async locate(name: string, storage?: string) {
    let unreachable: HostError | undefined;
    for (const runtime of this.byKind.values()) {
      let record: RuntimeRecord | undefined;
      try {
        record = await runtime.find(name, storage);
      } catch (err) {
        if (!(err instanceof HostError) || err.kind !== "unavailable") throw err;
        unreachable ??= err;
        continue;
      }
      if (record) return { runtime, record };
    }
    if (unreachable) throw unreachable;
    return undefined;
  }

  private async locateOrFail(name: string, storage?: string) {
    const found = await this.locate(vmName(name), storage);
    if (!found) throw notFound(vmName(name));
    return found;
  }

  private async assertFree(name: string, except?: DesktopRuntime) {
    const found = await this.locate(name);
    if (found && found.runtime !== except) {
      throw new HostError(
        "failed",
        `Virtual machine already exists with name: ${name}` +
          (this.byKind.size > 1 ? ` (a ${found.runtime.kind} desktop)` : ""),
      );
    }
  }
}

function notFound(name: string) {
  return new HostError("not_found", `Virtual machine not found: ${name}`);
}

/** The runtime as one with snapshots; a clear answer for one without. */
function snapshotting(runtime: DesktopRuntime): SnapshottingRuntime {
  if (!canSnapshot(runtime)) {
    throw new HostError(
      "not_supported",
      `Snapshots are not supported for ${runtime.kind} desktops (only QEMU VMs have them)`,
    );
  }
  return runtime;
}
