/**
 * Warm pools: each pool keeps `size` desktops started and answering, so that a claim hands one out
 * at once (an in-memory pick, one store write, one look at the desktop), and starts a replacement
 * in the background. It knows nothing of runtimes: desktops are made, run, watched and removed
 * through the VM service, whichever runtime backs them, and what must outlive the service is in a
 * `PoolStore` (pool-store.ts), written before each step it records.
 *
 * A member's life: `starting` (recorded first, then made from the template and run), `ready` (its
 * computer server answered), `claimed` (handed out until released, or until its ttl), then
 * removed. After a restart: `starting` members are removed (half-started), `ready` ones are
 * checked (running and answering) before they are handed out again, `claimed` ones keep their
 * claim and its ttl. Desktops that vanish or stop (killed from outside) are noticed by the
 * runtime's change events and by a periodic check, and replaced.
 */
import { randomBytes } from "node:crypto";
import { settled } from "../../common/settled.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { poolName } from "../names.js";
import type { ClaimRequest, PoolCreateRequest, PoolUpdateRequest } from "../requests.js";
import type { RuntimeKind } from "../runtimes/kinds.js";
import type { VmRecord, VmService } from "../vm-service.js";
import { poolNotFound } from "./file-pool-store.js";
import type { PoolStore } from "./pool-store.js";
import type { ClaimInfo, PoolDefinition, PoolMember, PoolSpec, PoolTemplate } from "./pool-types.js";
import { warmUp } from "./warm-up.js";

export interface PoolManagerOptions {
  /** How long a new desktop may take to answer before it is given up (default 10 min: QEMU without KVM boots slowly). */
  startTimeoutMs?: number;
  /** At most this many desktops started at once over all pools (default 4). */
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
}

/** A pool as `GET /svc/pools[/:name]` shows it. */
export interface PoolRecord {
  name: string;
  runtime: RuntimeKind;
  template: string;
  templateKind: PoolTemplate["kind"];
  size: number;
  ttl: number | null;
  spec: PoolSpec;
  ready: number;
  starting: number;
  claimed: number;
  /** Why the last start failed, while starts keep failing (they are retried with a growing delay). */
  lastError: string | null;
  createdAt: string;
  desktops: {
    name: string;
    state: PoolMember["state"];
    createdAt: string;
    readyAt: string | null;
    claimedBy: string | null;
    claimedAt: string | null;
    expiresAt: string | null;
  }[];
}

/** What a claim answers: the desktop's record, its pool and the claim. */
export type ClaimedDesktop = VmRecord & { pool: string; claim: ClaimInfo };

/** The sizes of a desktop made from an image when the pool names none. */
export const DEFAULT_POOL_SPEC: PoolSpec = { cpu: 1, memory: "2GB", diskSize: "8GB", display: "1280x800" };
const DEFAULT_CLAIM_WAIT_S = 60;
/** After a failed start, the next waits 1 s, then 2, 4 … up to a minute. */
const MAX_BACKOFF_MS = 60_000;

interface Waiter {
  give(name: string): void;
}

interface PoolState {
  def: PoolDefinition;
  members: Map<string, PoolMember>;
  /** Ready, unclaimed and checked members, oldest first: what a claim takes. */
  ready: string[];
  waiters: Waiter[];
  /** Members being made or started by this service, each with what cancels it. */
  starting: Map<string, AbortController>;
  /** Each start's work, to wait for once cancelled. */
  startWork: Map<string, Promise<void>>;
  failures: number;
  retryAt: number;
  retryTimer?: NodeJS.Timeout;
  lastError: string | null;
  removed: boolean;
}

export class PoolManager {
  private readonly pools = new Map<string, PoolState>();
  private readonly ttlTimers = new Map<string, NodeJS.Timeout>();
  /** Members being checked (so that a change event and the periodic check do not both act). */
  private readonly checking = new Set<string>();
  private readonly work = new Set<Promise<void>>();
  private checkTimer?: NodeJS.Timeout;
  private syncTimer?: NodeJS.Timeout;
  private closed = false;
  /** Whether this service refills, checks and expires claims: always, unless the store is shared. */
  private leading: boolean;
  private readonly store: PoolStore;
  /** Writes begun and ended, and those under way: a read made meanwhile may be stale. */
  private writes = 0;
  private writing = 0;

  constructor(
    private readonly vms: VmService,
    store: PoolStore,
    private readonly log: HostLog,
    private readonly options: PoolManagerOptions = {},
  ) {
    this.leading = !options.shared;
    this.store = this.counted(store);
    vms.onChange((name) => {
      if (!this.leading) return;
      const found = this.memberOf(name);
      if (found && found.member.state !== "starting") this.track(this.check(found.state, name));
    });
  }

  /** Loads the pools, puts right what a killed service left, and starts refilling. Once at start. */
  async start() {
    await this.sync();
    if (this.leading) this.reconcile();
    const interval = this.options.checkIntervalMs ?? 10_000;
    this.checkTimer = setInterval(() => this.checkAll(), interval);
    this.checkTimer.unref();
    if (this.options.shared) this.scheduleSync();
  }

  /** This service becomes the one that refills, checks and expires claims (it won the election). */
  lead() {
    if (this.leading || this.closed) return;
    this.leading = true;
    this.track(this.sync().then(() => this.reconcile()));
  }

  /** Another service leads now: starts in progress are cancelled (they remove what they made). */
  follow() {
    if (!this.leading) return;
    this.leading = false;
    for (const timer of this.ttlTimers.values()) clearTimeout(timer);
    this.ttlTimers.clear();
    for (const state of this.pools.values()) {
      clearTimeout(state.retryTimer);
      state.retryTimer = undefined;
      for (const controller of state.starting.values()) controller.abort();
    }
  }

  /** Puts right what a stopped or killed leader left: half-started members removed, the others checked. */
  private reconcile() {
    if (!this.leading || this.closed) return;
    for (const state of this.pools.values()) {
      for (const member of [...state.members.values()]) {
        if (member.state === "starting") this.track(this.removeHalfStarted(state, member.name));
        else this.track(this.check(state, member.name));
      }
      this.refill(state);
    }
  }

  private async removeHalfStarted(state: PoolState, name: string) {
    if (state.starting.has(name) || this.checking.has(name)) return; // being started here
    this.checking.add(name);
    try {
      await this.log.info("Removing a pool desktop a stopped service left half-started", {
        pool: state.def.name,
        vm: name,
      });
      await this.destroy(state, name);
      this.refill(state);
    } finally {
      this.checking.delete(name);
    }
  }

  private scheduleSync() {
    this.syncTimer = setTimeout(() => {
      void settled(this.sync()).then(() => {
        if (!this.closed) this.scheduleSync();
      });
    }, this.options.syncIntervalMs ?? 2000);
    this.syncTimer.unref();
  }

  /**
   * Takes in what the store holds now: pools and members added, changed or removed by another
   * service sharing it. Members this service is starting or checking keep its own view.
   */
  private async sync() {
    const writes = this.writes;
    const snapshot = await this.store.load();
    // A change written here meanwhile may be missing from what was read: the next sync takes it in.
    if (this.closed || writes !== this.writes || this.writing > 0) return;
    const defs = new Map(snapshot.pools.map((def) => [def.name, def]));
    for (const state of [...this.pools.values()]) {
      if (!state.removed && !defs.has(state.def.name)) this.forget(state);
    }
    for (const def of snapshot.pools) {
      const state = this.pools.get(def.name);
      if (!state) this.pools.set(def.name, newState(def));
      else if (!state.removed) state.def = def;
    }
    const stored = new Map(snapshot.members.map((member) => [member.name, member]));
    for (const state of this.pools.values()) {
      for (const name of [...state.members.keys()]) {
        if (!stored.has(name) && !state.starting.has(name) && !this.checking.has(name)) {
          this.drop(state, name); // removed by another service
        }
      }
    }
    for (const member of snapshot.members) {
      const state = this.pools.get(member.pool);
      if (!state || state.removed || state.starting.has(member.name) || this.checking.has(member.name)) {
        continue;
      }
      state.members.set(member.name, member);
      if (member.state === "claimed") {
        state.ready = state.ready.filter((n) => n !== member.name);
        if (this.leading && !this.ttlTimers.has(member.name)) this.armTtl(state, member);
      } else if (member.state === "ready" && !state.ready.includes(member.name)) {
        // The leader checked it before it recorded it ready; a follower hands it out as it is.
        if (this.leading) this.track(this.check(state, member.name));
        else this.handOut(state, member.name);
      } else if (member.state === "starting" && this.leading) {
        // Only the leader starts members: one that is not ours was left by a previous leader.
        this.track(this.removeHalfStarted(state, member.name));
      }
    }
    if (this.leading) {
      for (const state of this.pools.values()) {
        this.shrink(state);
        this.refill(state);
      }
    }
  }

  /** Forgets a member another service removed. */
  private drop(state: PoolState, name: string) {
    state.members.delete(name);
    state.ready = state.ready.filter((n) => n !== name);
    clearTimeout(this.ttlTimers.get(name));
    this.ttlTimers.delete(name);
  }

  /** Forgets a pool another service removed; its starts here are cancelled and remove what they made. */
  private forget(state: PoolState) {
    state.removed = true;
    clearTimeout(state.retryTimer);
    for (const controller of state.starting.values()) controller.abort();
    for (const waiter of state.waiters.splice(0)) waiter.give("");
    for (const name of state.members.keys()) {
      clearTimeout(this.ttlTimers.get(name));
      this.ttlTimers.delete(name);
    }
    state.ready = [];
    this.pools.delete(state.def.name);
  }

  async create(request: PoolCreateRequest): Promise<PoolRecord> {
    const name = poolName(request.name);
    if (this.pools.has(name)) throw new HostError("failed", `Pool already exists with name: ${name}`);
    const { runtime, template } = await this.resolveTemplate(request);
    if (request.network && template.kind === "desktop") {
      throw new HostError(
        "invalid_params",
        `network: a pool made from a desktop (${template.name}) gives each clone that desktop's own policy: set it there`,
      );
    }
    const def: PoolDefinition = {
      name,
      runtime,
      template,
      spec: {
        cpu: request.cpu ?? DEFAULT_POOL_SPEC.cpu,
        memory: request.memory ?? DEFAULT_POOL_SPEC.memory,
        diskSize: request.diskSize ?? DEFAULT_POOL_SPEC.diskSize,
        display: request.display ?? DEFAULT_POOL_SPEC.display,
        ...(request.network && { network: request.network }),
      },
      size: request.size,
      ttlSeconds: request.ttl ?? null,
      createdAt: new Date().toISOString(),
    };
    await this.store.createPool(def);
    const state = newState(def);
    this.pools.set(name, state);
    await this.log.info("Pool created", {
      pool: name,
      runtime,
      template: describeTemplate(template),
      size: def.size,
    });
    this.refill(state);
    return this.record(state);
  }

  list(): PoolRecord[] {
    return [...this.pools.values()].map((state) => this.record(state));
  }

  get(name: string): PoolRecord {
    return this.record(this.state(name));
  }

  /** Changes the size (the pool grows or shrinks in the background) or the ttl of new claims. */
  async update(name: string, request: PoolUpdateRequest): Promise<PoolRecord> {
    const state = this.state(name);
    state.def = await this.store.updatePool(state.def.name, (def) => ({
      ...def,
      ...(request.size !== undefined && { size: request.size }),
      ...(request.ttl !== undefined && { ttlSeconds: request.ttl }),
    }));
    await this.log.info("Pool changed", { pool: name, size: state.def.size, ttl: state.def.ttlSeconds });
    this.shrink(state);
    this.refill(state);
    return this.record(state);
  }

  /** Removes the pool and every desktop of it, claimed ones too. */
  async remove(name: string) {
    const state = this.state(name);
    state.removed = true;
    clearTimeout(state.retryTimer);
    for (const controller of state.starting.values()) controller.abort();
    for (const waiter of state.waiters.splice(0)) waiter.give("");
    state.ready = [];
    const members = [...state.members.keys()].filter((m) => !state.starting.has(m));
    // Starts in progress end by removing what they made.
    await Promise.all([...members.map((member) => this.destroy(state, member)), ...state.startWork.values()]);
    await this.store.removePool(name);
    this.pools.delete(name);
    await this.log.info("Pool removed", { pool: name, desktops: members.length });
  }

  /**
   * Hands out a ready desktop: at once when the pool has one; otherwise waits for the next (up to
   * `timeout` seconds), or answers 503 at once with `wait: false`.
   */
  async claim(name: string, request: ClaimRequest = {}, signal?: AbortSignal): Promise<ClaimedDesktop> {
    if (this.options.shared && !this.pools.has(name)) await this.sync(); // made by another service
    const state = this.state(name);
    const waitMs = request.wait === false ? 0 : (request.timeout ?? DEFAULT_CLAIM_WAIT_S) * 1000;
    const deadline = Date.now() + waitMs;
    for (;;) {
      let candidate = state.ready.shift();
      if (candidate === undefined) {
        const left = deadline - Date.now();
        if (left <= 0 || state.removed) throw this.exhausted(state, waitMs);
        candidate = await this.nextReady(state, left, signal);
        if (candidate === undefined) {
          if (signal?.aborted) throw new HostError("cancelled", "The claim was cancelled");
          throw this.exhausted(state, waitMs);
        }
      }
      const claimed = await this.tryClaim(state, candidate, request);
      if (claimed) return claimed;
    }
  }

  /** Ends a claim: the desktop is removed and the pool makes a new one in the background. */
  async release(name: string): Promise<{ name: string; pool: string }> {
    // Claimed through another service sharing the store: read it again first.
    if (this.options.shared && this.memberOf(name)?.member.state !== "claimed") await this.sync();
    const found = this.memberOf(name);
    if (!found) {
      throw new HostError("invalid_params", `${name} is not a desktop of a pool: nothing to release`);
    }
    const { state, member } = found;
    if (member.state !== "claimed") {
      throw new HostError(
        "invalid_params",
        `${name} is not claimed: it waits in pool ${state.def.name} (claim it first)`,
      );
    }
    await this.destroy(state, name);
    await this.log.info("Pool desktop released", { pool: state.def.name, vm: name });
    this.refill(state);
    return { name, pool: state.def.name };
  }

  /** The pool a desktop belongs to, for records and routes; undefined for other desktops. */
  poolOf(name: string): string | undefined {
    return this.memberOf(name)?.state.def.name;
  }

  /** Waits for every start, check and removal in progress (tests and shutdown). */
  async settled() {
    while (this.work.size > 0) await Promise.all([...this.work]);
  }

  /** Stops starting and checking; starts in progress are abandoned (a later start removes them). */
  async close() {
    this.closed = true;
    clearInterval(this.checkTimer);
    clearTimeout(this.syncTimer);
    for (const timer of this.ttlTimers.values()) clearTimeout(timer);
    for (const state of this.pools.values()) {
      clearTimeout(state.retryTimer);
      for (const waiter of state.waiters.splice(0)) waiter.give("");
      for (const controller of state.starting.values()) controller.abort();
    }
    await this.settled();
    await this.store.close();
  }

  // ---- claims ----

  private async tryClaim(
    state: PoolState,
    name: string,
    request: ClaimRequest,
  ): Promise<ClaimedDesktop | undefined> {
    const at = new Date();
    const ttl = request.ttl ?? state.def.ttlSeconds;
    const claim: ClaimInfo = {
      by: request.owner ?? null,
      at: at.toISOString(),
      expiresAt: ttl ? new Date(at.getTime() + ttl * 1000).toISOString() : null,
    };
    let member: PoolMember;
    try {
      member = await this.store.updateMember(name, (m) => {
        if (m.state !== "ready") throw new HostError("failed", `${name} is no longer ready`);
        return { ...m, state: "claimed", claim };
      });
    } catch {
      return undefined; // taken, or gone: the next one
    }
    state.members.set(name, member);
    this.armTtl(state, member);
    this.refill(state);
    const record = await this.vms.find(name).catch(() => undefined);
    if (record?.status !== "running") {
      // It stopped while it waited in the pool: not something to hand out.
      await this.log.info("A ready pool desktop had stopped; it is replaced", {
        pool: state.def.name,
        vm: name,
      });
      this.track(this.destroy(state, name).then(() => this.refill(state)));
      return undefined;
    }
    await this.log.info("Pool desktop claimed", {
      pool: state.def.name,
      vm: name,
      by: claim.by ?? undefined,
      expiresAt: claim.expiresAt ?? undefined,
    });
    return { ...record, pool: state.def.name, claim };
  }

  /** The next desktop to become ready in this pool, handed to the oldest waiter first. */
  private nextReady(state: PoolState, ms: number, signal?: AbortSignal): Promise<string | undefined> {
    return new Promise((resolve) => {
      const waiter: Waiter = {
        give: (name) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", cancel);
          resolve(name || undefined);
        },
      };
      const cancel = () => {
        state.waiters = state.waiters.filter((w) => w !== waiter);
        waiter.give("");
      };
      const timer = setTimeout(cancel, ms);
      signal?.addEventListener("abort", cancel, { once: true });
      state.waiters.push(waiter);
    });
  }

  private exhausted(state: PoolState, waitedMs: number) {
    const starting = state.starting.size;
    const why = state.lastError && starting === 0 ? `; the last start failed: ${state.lastError}` : "";
    return new HostError(
      "exhausted",
      waitedMs > 0
        ? `Pool ${state.def.name} had no ready desktop within ${waitedMs / 1000} s (${starting} starting${why})`
        : `Pool ${state.def.name} has no ready desktop now (${starting} starting${why}); claim with wait to wait for one`,
    );
  }

  private armTtl(state: PoolState, member: PoolMember) {
    clearTimeout(this.ttlTimers.get(member.name));
    if (!this.leading) return; // the leader expires claims
    const expiresAt = member.claim?.expiresAt;
    if (!expiresAt) return;
    // setTimeout holds at most 2^31-1 ms; a longer ttl is armed again when that runs out.
    const ms = Math.min(Math.max(0, Date.parse(expiresAt) - Date.now()), 2 ** 31 - 1);
    const timer = setTimeout(() => {
      this.ttlTimers.delete(member.name);
      const now = state.members.get(member.name);
      if (now?.state !== "claimed") return;
      if (Date.parse(now.claim?.expiresAt ?? "") > Date.now()) return this.armTtl(state, now);
      this.track(
        (async () => {
          await this.log.info("Pool claim expired: the desktop is released", {
            pool: state.def.name,
            vm: member.name,
            by: now.claim?.by ?? undefined,
          });
          await this.destroy(state, member.name);
          this.refill(state);
        })(),
      );
    }, ms);
    timer.unref();
    this.ttlTimers.set(member.name, timer);
  }

  // ---- refilling ----

  private refill(state: PoolState) {
    if (state.removed || this.closed || !this.leading) return;
    const wait = state.retryAt - Date.now();
    if (wait > 0) {
      if (!state.retryTimer) {
        state.retryTimer = setTimeout(() => {
          state.retryTimer = undefined;
          this.refill(state);
        }, wait);
        state.retryTimer.unref();
      }
      return;
    }
    const unclaimed = [...state.members.values()].filter((m) => m.state !== "claimed").length;
    const limit = this.options.maxStarting ?? 4;
    for (let missing = state.def.size - unclaimed; missing > 0; missing--) {
      if (this.startingCount() >= limit) return;
      this.startMember(state);
    }
  }

  private refillAll() {
    for (const state of this.pools.values()) this.refill(state);
  }

  /** Removes ready members beyond the size (newest first); starting ones finish and are removed then. */
  private shrink(state: PoolState) {
    if (!this.leading) return;
    let excess = [...state.members.values()].filter((m) => m.state !== "claimed").length - state.def.size;
    while (excess > 0 && state.ready.length > 0) {
      const name = state.ready.pop() as string;
      this.track(this.retire(state, name));
      excess--;
    }
    for (const controller of [...state.starting.values()].reverse()) {
      if (excess-- <= 0) break;
      controller.abort();
    }
  }

  /**
   * Removes a ready member unless another service sharing the store claimed it meanwhile: it is
   * first recorded as starting (no claim takes it; a leader that dies here leaves it half-started,
   * which the next one removes).
   */
  private async retire(state: PoolState, name: string) {
    if (this.checking.has(name)) return;
    this.checking.add(name);
    try {
      const member = await this.store
        .updateMember(name, (m) => {
          if (m.state !== "ready") throw new HostError("failed", `${name} is no longer ready`);
          return { ...m, state: "starting" as const };
        })
        .catch(() => undefined);
      if (!member) return; // claimed or gone: not ours to remove
      state.members.set(name, member);
      await this.destroy(state, name);
    } finally {
      this.checking.delete(name);
    }
  }

  private startingCount() {
    let count = 0;
    for (const state of this.pools.values()) count += state.starting.size;
    return count;
  }

  private startMember(state: PoolState) {
    const name = `${state.def.name}-${randomBytes(4).toString("hex")}`;
    const controller = new AbortController();
    state.starting.set(name, controller);
    const member: PoolMember = {
      name,
      pool: state.def.name,
      state: "starting",
      createdAt: new Date().toISOString(),
      readyAt: null,
      claim: null,
    };
    state.members.set(name, member);
    const work = this.makeReady(state, member, controller.signal).finally(() => {
      state.starting.delete(name);
      state.startWork.delete(name);
      this.refillAll();
    });
    state.startWork.set(name, work);
    this.track(work);
  }

  private async makeReady(state: PoolState, member: PoolMember, signal: AbortSignal) {
    const { def } = state;
    const name = member.name;
    const started = Date.now();
    let made = false;
    try {
      await this.store.addMember(member);
      signal.throwIfAborted();
      if (def.template.kind === "desktop") {
        await this.vms.clone({ name: def.template.name, newName: name });
      } else {
        await this.vms.create({
          name,
          runtime: def.runtime,
          image: def.template.image,
          os: "linux",
          ...def.spec,
        });
      }
      made = true;
      signal.throwIfAborted();
      await this.vms.run(name, {});
      const record = await this.vms.waitReady(name, this.options.startTimeoutMs ?? 600_000, signal);
      signal.throwIfAborted();
      if (!(await warmUp(record))) {
        void this.log.info("A pool desktop's first screenshot failed; it is handed out all the same", {
          pool: def.name,
          vm: name,
        });
      }
      signal.throwIfAborted();
      const ready = await this.store.updateMember(name, (m) => ({
        ...m,
        state: "ready",
        readyAt: new Date().toISOString(),
      }));
      state.members.set(name, ready);
      state.failures = 0;
      state.lastError = null;
      state.retryAt = 0;
      void this.log.info("Pool desktop ready", { pool: def.name, vm: name, ms: Date.now() - started });
      this.handOut(state, name);
    } catch (err) {
      const cancelled = signal.aborted || this.closed || state.removed;
      if (!cancelled) {
        state.failures++;
        state.lastError = (err as Error).message;
        state.retryAt = Date.now() + Math.min(MAX_BACKOFF_MS, 1000 * 2 ** (state.failures - 1));
        await this.log.error("Pool desktop failed to start", {
          pool: def.name,
          vm: name,
          error: state.lastError,
          retryInMs: state.retryAt - Date.now(),
        });
      }
      // A closing service leaves it: the next start removes what was half-started.
      if (!this.closed) await this.destroy(state, name, made);
    }
  }

  /** A member that became ready goes to the oldest waiting claim, or into the ready list. */
  private handOut(state: PoolState, name: string) {
    const waiter = state.waiters.shift();
    if (waiter) waiter.give(name);
    else state.ready.push(name);
  }

  // ---- checking and removing ----

  private checkAll() {
    if (!this.leading) return;
    for (const state of this.pools.values()) {
      for (const member of state.members.values()) {
        if (member.state !== "starting") this.track(this.check(state, member.name));
      }
    }
  }

  /**
   * Looks at a member's desktop: gone or stopped → removed (a claimed one only when gone: its
   * claimant may still read its logs), an expired claim → released, a ready one not yet handed
   * out since a restart → handed out once it answers. An engine that cannot be reached changes nothing.
   */
  private async check(state: PoolState, name: string) {
    if (this.checking.has(name) || this.closed || !this.leading) return;
    this.checking.add(name);
    try {
      const member = state.members.get(name);
      if (!member || member.state === "starting") return;
      let record: VmRecord | undefined;
      try {
        record = await this.vms.find(name);
      } catch (err) {
        if (!(err instanceof HostError) || err.kind !== "not_found") return; // unreachable: later
      }
      const now = state.members.get(name);
      if (!now || now.state === "starting") return;
      if (!record || (now.state === "ready" && record.status !== "running")) {
        await this.log.info("A pool desktop stopped or vanished; it is replaced", {
          pool: state.def.name,
          vm: name,
          state: now.state,
        });
        await this.destroy(state, name, Boolean(record));
        this.refill(state);
        return;
      }
      if (now.state === "claimed") {
        if (!this.ttlTimers.has(name)) this.armTtl(state, now);
        return;
      }
      if (!state.ready.includes(name)) {
        // Ready before a restart: handed out again once its computer server answers.
        await this.vms.waitReady(name, 30_000).then(
          () => {
            if (state.members.get(name)?.state === "ready" && !state.ready.includes(name)) {
              this.handOut(state, name);
            }
          },
          async (err: Error) => {
            if (
              err instanceof HostError &&
              err.kind === "unavailable" &&
              /not ready after/.test(err.message)
            ) {
              await this.destroy(state, name, true);
              this.refill(state);
            }
          },
        );
      }
    } finally {
      this.checking.delete(name);
    }
  }

  /** Removes a member's desktop (unless `exists` says there is none) and then its record. */
  private async destroy(state: PoolState, name: string, exists = true) {
    state.ready = state.ready.filter((n) => n !== name);
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

  // ---- templates and records ----

  private async resolveTemplate(request: PoolCreateRequest) {
    const wanted = request.runtime;
    if (request.template !== undefined) {
      const desktop = await this.vms.find(request.template).catch((err) => {
        if (err instanceof HostError && (err.kind === "not_found" || err.kind === "invalid_params")) {
          return undefined;
        }
        throw err;
      });
      if (desktop) {
        if (wanted && wanted !== desktop.runtime) {
          throw new HostError(
            "invalid_params",
            `Template ${desktop.name} is a ${desktop.runtime} desktop, not a ${wanted} one`,
          );
        }
        const template: PoolTemplate = { kind: "desktop", name: desktop.name };
        return { runtime: desktop.runtime, template };
      }
    }
    const runtime = this.vms.runtime(wanted ?? this.vms.defaultRuntime);
    const image = request.template ?? runtime.defaultImage;
    if (!runtime.hasImage || image === undefined) {
      throw new HostError(
        "invalid_params",
        request.template === undefined
          ? `A ${runtime.kind} pool needs a template: the name of a stopped desktop to clone`
          : `Template not found: ${request.template} is not a desktop (a ${runtime.kind} pool clones a stopped desktop)`,
      );
    }
    if (!(await runtime.hasImage(image))) {
      throw new HostError(
        "invalid_params",
        `Template not found: ${image} is neither a desktop nor an image the ${runtime.kind} runtime has ` +
          `(pull it first: POST /svc/pull {"image": "${image}", "runtime": "${runtime.kind}"})`,
      );
    }
    const template: PoolTemplate = { kind: "image", image };
    return { runtime: runtime.kind, template };
  }

  private state(name: string): PoolState {
    const state = this.pools.get(name);
    if (!state || state.removed) throw poolNotFound(name);
    return state;
  }

  private memberOf(name: string): { state: PoolState; member: PoolMember } | undefined {
    for (const state of this.pools.values()) {
      const member = state.members.get(name);
      if (member) return { state, member };
    }
    return undefined;
  }

  private record(state: PoolState): PoolRecord {
    const members = [...state.members.values()];
    const count = (s: PoolMember["state"]) => members.filter((m) => m.state === s).length;
    return {
      name: state.def.name,
      runtime: state.def.runtime,
      template: describeTemplate(state.def.template),
      templateKind: state.def.template.kind,
      size: state.def.size,
      ttl: state.def.ttlSeconds,
      spec: state.def.spec,
      ready: count("ready"),
      starting: count("starting"),
      claimed: count("claimed"),
      lastError: state.lastError,
      createdAt: state.def.createdAt,
      desktops: members.map((m) => ({
        name: m.name,
        state: m.state,
        createdAt: m.createdAt,
        readyAt: m.readyAt,
        claimedBy: m.claim?.by ?? null,
        claimedAt: m.claim?.at ?? null,
        expiresAt: m.claim?.expiresAt ?? null,
      })),
    };
  }

  /** The store, each write counted (see sync). */
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

  private track(work: Promise<unknown>) {
    const done = settled(work);
    this.work.add(done);
    void done.then(() => this.work.delete(done));
  }
}

function newState(def: PoolDefinition): PoolState {
  return {
    def,
    members: new Map(),
    ready: [],
    waiters: [],
    starting: new Map(),
    startWork: new Map(),
    failures: 0,
    retryAt: 0,
    lastError: null,
    removed: false,
  };
}

function describeTemplate(template: PoolTemplate): string {
  return template.kind === "desktop" ? template.name : template.image;
}
