/**
 * What the parts of the pool manager share (pool-manager.ts composes them): the pools and their
 * members as this service holds them, the store (every write counted, see pool-sync.ts), the
 * desktops (the VM service, or a fake of it in the unit test), the timers of claims, and the work
 * in progress. Also the one way a member goes: `destroy` (its desktop, then its record).
 */
import { settled } from "../../common/settled.js";
import type { DesktopRecord, DesktopService } from "../desktops/desktop-service.js";
import type { HibernationMode } from "../desktops/hibernation.js";
import type { DesktopRuntime, RuntimeKind, SnapshotRecord } from "../desktops/runtime.js";
import { HostError } from "../errors.js";
import type { LifecycleEvents } from "../events.js";
import type { HostLog } from "../host-log.js";
import type { ForkRequest } from "../requests.js";
import type { Awake } from "../sleep/sleep-control.js";
import { poolNotFound } from "./pool-edits.js";
import type { PoolStore } from "./pool-store.js";
import type { PoolDefinition, PoolMember } from "./pool-types.js";

/** What pools ask of the desktops: the VM service's calls, so that a test can give a fake of it. */
export type PoolDesktops = Pick<
  DesktopService,
  "find" | "waitReady" | "create" | "clone" | "run" | "remove" | "onChange" | "defaultRuntime" | "lifecycle"
> & {
  runtime(
    kind: RuntimeKind,
  ): Pick<
    DesktopRuntime,
    "kind" | "defaultImage" | "hasImage" | "hibernation" | "snapshots" | "localRecords"
  >;
  fork(name: string, request: ForkRequest): Promise<string[]>;
  listSnapshots(name: string): Promise<SnapshotRecord[]>;
  hibernate(name: string, mode?: HibernationMode): Promise<unknown>;
  ensureAwake(name: string, why?: string): Promise<Awake>;
};

/**
 * Whether desktops of this runtime can sleep as a pool's standby or an expired claim: only where
 * sleep keeps their memory (QEMU, containers paused); a Pod asleep is a cold start to wake, and
 * only one with a persistent home can sleep at all.
 */
export function canKeepAsleep(vms: Pick<PoolDesktops, "runtime">, kind: RuntimeKind): boolean {
  try {
    const modes: readonly HibernationMode[] = vms.runtime(kind).hibernation?.modes ?? [];
    return modes.includes("memory") || modes.includes("paused");
  } catch {
    return false;
  }
}

export interface PoolManagerOptions {
  /** How long a new desktop may take to answer before it is given up (default 10 min: QEMU without KVM boots slowly). */
  startTimeoutMs?: number;
  /**
   * At most this many desktops started at once over all pools (default: for QEMU and containers the
   * host's CPUs, at least 2: starts beyond that share the cores and each takes longer, so a claim
   * waiting for the next one waits longer, bench/containers.ts; for Kubernetes Pods 4).
   */
  maxStarting?: number;
  /** How often every member is checked against its desktop (default 10 s). */
  checkIntervalMs?: number;
  /**
   * Several services share the store (`--pools-in-cluster`): each starts as a follower that serves
   * claims and releases and reads the store again every `syncIntervalMs`; only the one told to
   * `lead()` (by leader election) refills, checks and expires claims.
   */
  shared?: boolean;
  /** How often a shared store is read again (default 2 s). */
  syncIntervalMs?: number;
  /**
   * Whether a new desktop is warmed up (warm-up.ts: its first screenshots answered) before it
   * counts as ready (default true).
   */
  warmUp?: boolean;
  /**
   * Whether a ready desktop answers, asked at its claim (default: its computer server's `GET
   * /status`, straight to it, not through the runtime's engine).
   */
  answers?: (record: DesktopRecord) => Promise<boolean>;
}

export interface Waiter {
  give(name: string): void;
}

export interface PoolState {
  def: PoolDefinition;
  members: Map<string, PoolMember>;
  /** Ready, unclaimed and checked members, oldest first: what a claim takes. */
  ready: string[];
  /**
   * The record each ready member had when it became ready, which a claim answers with once the
   * desktop answers again (no look through the runtime's engine, busy with the refills' starts).
   */
  records: Map<string, DesktopRecord>;
  waiters: Waiter[];
  /** Members being made or started by this service, each with what cancels it. */
  starting: Map<string, AbortController>;
  /** Each start's work, to wait for once cancelled. */
  startWork: Map<string, Promise<void>>;
  /** What each start does now, and since when (ms since the epoch): shown in the pool's record. */
  startSteps: Map<string, { step: string; since: number }>;
  /** Members being woken, or put to sleep, by this service. */
  waking: Set<string>;
  sleeping: Set<string>;
  failures: number;
  retryAt: number;
  retryTimer?: NodeJS.Timeout;
  /** When the next ready member beyond the target has been idle long enough. */
  idleTimer?: NodeJS.Timeout;
  lastError: string | null;
  removed: boolean;
}

export function newState(def: PoolDefinition): PoolState {
  return {
    def,
    members: new Map(),
    ready: [],
    records: new Map(),
    waiters: [],
    starting: new Map(),
    startWork: new Map(),
    startSteps: new Map(),
    waking: new Set(),
    sleeping: new Set(),
    failures: 0,
    retryAt: 0,
    lastError: null,
    removed: false,
  };
}

export class PoolContext {
  readonly pools = new Map<string, PoolState>();
  readonly ttlTimers = new Map<string, NodeJS.Timeout>();
  /** Members being checked (so that a change event and the periodic check do not both act). */
  readonly checking = new Set<string>();
  private readonly work = new Set<Promise<void>>();
  closed = false;
  /** Whether this service refills, checks and expires claims: always, unless the store is shared. */
  leading: boolean;
  readonly store: PoolStore;
  /** Writes begun and ended, and those under way: a read made meanwhile may be stale. */
  writes = 0;
  writing = 0;
  /** Set by the manager: brings a pool to its size (pool-refill.ts). */
  refill: (state: PoolState) => void = () => undefined;

  constructor(
    readonly vms: PoolDesktops,
    store: PoolStore,
    readonly log: HostLog,
    readonly options: PoolManagerOptions,
    /** Claims, releases and failed starts, for the event stream and the metrics (events.ts). */
    readonly events?: LifecycleEvents,
  ) {
    this.leading = !options.shared;
    this.store = this.counted(store);
  }

  state(name: string): PoolState {
    const state = this.pools.get(name);
    if (!state || state.removed) throw poolNotFound(name);
    return state;
  }

  memberOf(name: string): { state: PoolState; member: PoolMember } | undefined {
    for (const state of this.pools.values()) {
      const member = state.members.get(name);
      if (member) return { state, member };
    }
    return undefined;
  }

  startingCount() {
    let count = 0;
    for (const state of this.pools.values()) count += state.starting.size + state.waking.size;
    return count;
  }

  /** Whether the pool's runtime can put desktops to sleep. */
  canSleep(state: PoolState): boolean {
    return canKeepAsleep(this.vms, state.def.runtime);
  }

  /** Removes a member's desktop (unless `exists` says there is none) and then its record. */
  async destroy(state: PoolState, name: string, exists = true) {
    state.ready = state.ready.filter((n) => n !== name);
    state.records.delete(name);
    clearTimeout(this.ttlTimers.get(name));
    this.ttlTimers.delete(name);
    if (exists) {
      try {
        await this.vms.remove(name);
      } catch (err) {
        if (!(err instanceof HostError) || err.kind !== "not_found") {
          await this.log.error("Cannot remove a pool desktop; the next check tries again", {
            pool: state.def.name,
            vm: name,
            error: (err as Error).message,
          });
          throw err;
        }
      }
    }
    await this.store.removeMember(name);
    state.members.delete(name);
  }

  track(work: Promise<unknown>) {
    const done = settled(work);
    this.work.add(done);
    void done.then(() => this.work.delete(done));
  }

  async settled() {
    while (this.work.size > 0) await Promise.all([...this.work]);
  }

  /** The store, each write counted (see pool-sync.ts). */
  private counted(store: PoolStore): PoolStore {
    const count =
      <A extends unknown[], T>(write: (...args: A) => Promise<T>) =>
      async (...args: A): Promise<T> => {
        this.writes++;
        this.writing++;
        try {
          return await write.apply(store, args);
        } finally {
          this.writing--;
          this.writes++;
        }
      };
    return {
      load: () => store.load(),
      close: () => store.close(),
      createPool: count(store.createPool),
      updatePool: count(store.updatePool),
      removePool: count(store.removePool),
      addMember: count(store.addMember),
      updateMember: count(store.updateMember),
      removeMember: count(store.removeMember),
    };
  }
}
