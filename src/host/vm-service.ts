/**
 * What the VM routes ask for, in one place: find, list, create, clone, update, delete, run, stop
 * and wait for desktops, whichever runtime backs them (runtimes/runtime.ts). A name is unique
 * across runtimes; each request goes to the runtime that has the desktop, a new desktop to the
 * runtime it asks for (or the service's default). Readiness is added to every record here.
 */
import type { Readable } from "node:stream";
import { HostError } from "./errors.js";
import type { HostLog } from "./host-log.js";
import { KeyedLock } from "./keyed-lock.js";
import { vmName } from "./names.js";
import type { CloneRequest, CreateRequest, RunRequest, StopRequest, UpdateRequest } from "./requests.js";
import { type Readiness, ReadinessTracker } from "./runtimes/readiness.js";
import type {
  DesktopRuntime,
  LogOptions,
  RuntimeKind,
  RuntimeRecord,
  StopOutcome,
} from "./runtimes/runtime.js";
import type { PullRecord, PushState, VmActivity } from "./vm-activity.js";

/** A desktop's record: lume's keys, Hangar's, its runtime, its readiness, and `push` once pushed. */
export type VmRecord = RuntimeRecord & Readiness & { push?: PushState };

/** The longest `waitReady` waits (a cold boot under software emulation takes about a minute). */
export const MAX_WAIT_MS = 15 * 60_000;

export class VmService {
  private readonly byKind: Map<RuntimeKind, DesktopRuntime>;
  private readonly readiness: ReadinessTracker;
  /** Creations and clones hold their new name, so two runtimes never get one name at once. */
  private readonly names = new KeyedLock();

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
    this.readiness = new ReadinessTracker((record) => this.runtime(record.runtime).find(record.name));
    for (const runtime of runtimes) runtime.onChange?.(() => this.readiness.notify());
  }

  /** The runtimes this service has, the default first. */
  get kinds(): RuntimeKind[] {
    return [this.defaultRuntime, ...[...this.byKind.keys()].filter((k) => k !== this.defaultRuntime)];
  }

  async list(storage?: string): Promise<VmRecord[]> {
    const lists = await Promise.all([...this.byKind.values()].map((runtime) => runtime.list(storage)));
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
  async get(name: string, storage?: string): Promise<VmRecord | PullRecord> {
    const pulling = this.activity.pulling(name);
    if (pulling) return pulling;
    try {
      return await this.find(name, storage);
    } catch (err) {
      throw this.activity.pullFailure(name) ?? err;
    }
  }

  /** The desktop's record, from whichever runtime has it; a clear 400 when none has. */
  async find(name: string, storage?: string): Promise<VmRecord> {
    const found = await this.locate(vmName(name), storage);
    if (!found) throw notFound(vmName(name));
    return this.withReadiness(found.record);
  }

  /**
   * Waits until the desktop is ready (its computer server answered), then gives its record.
   * Fails at once when the desktop is not running and not starting, or stops while waited for.
   */
  async waitReady(name: string, timeoutMs: number, signal?: AbortSignal): Promise<VmRecord> {
    const deadline = AbortSignal.timeout(Math.min(timeoutMs, MAX_WAIT_MS));
    const stop = signal ? AbortSignal.any([deadline, signal]) : deadline;
    for (;;) {
      // Listen before reading, so a change between the read and the wait is not missed.
      const woken = new AbortController();
      const next = this.readiness.next(AbortSignal.any([stop, woken.signal]));
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
    this.readiness.notify();
    return { name, runtime: runtime.kind };
  }

  async remove(name: string, storage?: string) {
    const { runtime, record } = await this.locateOrFail(name, storage);
    await runtime.remove(record.name, storage);
    this.readiness.notify();
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

  async run(name: string, request: RunRequest) {
    const { runtime, record } = await this.locateOrFail(name, request.storage);
    await runtime.run(record.name, request);
    this.readiness.notify();
    return record;
  }

  async stop(name: string, request: StopRequest = {}): Promise<StopOutcome> {
    const { runtime, record } = await this.locateOrFail(name, request.storage);
    const outcome = await runtime.stop(record.name, request);
    this.readiness.notify();
    return outcome;
  }

  async logs(name: string, options: LogOptions): Promise<Readable> {
    const { runtime, record } = await this.locateOrFail(name);
    return runtime.logs(record.name, options);
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
  }

  /** Waits for every start in progress (tests and shutdown). */
  async settled() {
    await Promise.all([...this.byKind.values()].map((runtime) => runtime.settled()));
  }

  async close() {
    this.readiness.close();
    await Promise.all([...this.byKind.values()].map((runtime) => runtime.close()));
  }

  /** The runtime of this kind; a clear 400 when the service has none. */
  runtime(kind: RuntimeKind): DesktopRuntime {
    const runtime = this.byKind.get(kind);
    if (!runtime) {
      throw new HostError(
        "invalid_params",
        `Runtime '${kind}' is not available here (available: ${this.kinds.join(", ")})`,
      );
    }
    return runtime;
  }

  private withReadiness(record: RuntimeRecord): VmRecord {
    return { ...record, ...this.readiness.of(record) };
  }

  private async locate(name: string, storage?: string) {
    for (const runtime of this.byKind.values()) {
      const record = await runtime.find(name, storage);
      if (record) return { runtime, record };
    }
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
