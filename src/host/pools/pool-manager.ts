/**
 * Warm pools: each pool keeps desktops started and answering, so that a claim hands one out at
 * once (an in-memory pick, one store write, one look at the desktop), and follows demand between
 * `min` and `max` around a `target` (pool-sizing.ts). It knows nothing of runtimes: desktops are
 * made, run, put to sleep, watched and removed through the VM service, whichever runtime backs
 * them, and what must outlive the service is in a `PoolStore` (pool-store.ts), written before each
 * step it records.
 *
 * A member's life: `starting` (recorded first, then made from the template and run, or forked
 * from a memory snapshot), `ready` (its computer server answered), `hibernated` (unclaimed, asleep
 * as standby), `claimed` (handed out until released, or until its lease runs out), then removed.
 *
 * This file composes the parts, by concern: claims and leases (pool-claims.ts), refill and
 * shrink (pool-refill.ts), health checks (pool-health.ts), leadership and the store read again
 * (pool-sync.ts); what they share is in pool-context.ts.
 */
import { HostError } from "../errors.js";
import type { LifecycleEvents } from "../events.js";
import type { HostLog } from "../host-log.js";
import { poolName, snapshotName } from "../names.js";
import type { ClaimRequest, KeepaliveRequest, PoolCreateRequest, PoolUpdateRequest } from "../requests.js";
import { type ClaimedDesktop, PoolClaims } from "./pool-claims.js";
import {
  canKeepAsleep,
  newState,
  PoolContext,
  type PoolDesktops,
  type PoolManagerOptions,
} from "./pool-context.js";
import { PoolHealth } from "./pool-health.js";
import { describeTemplate, type PoolRecord, poolRecord } from "./pool-records.js";
import { PoolRefill } from "./pool-refill.js";
import type { PoolStore } from "./pool-store.js";
import { PoolSync } from "./pool-sync.js";
import type { PoolDefinition, PoolSpec, PoolTemplate } from "./pool-types.js";

export type { ClaimedDesktop } from "./pool-claims.js";
export type { PoolDesktops, PoolManagerOptions } from "./pool-context.js";
export type { PoolRecord } from "./pool-records.js";

/** The sizes of a desktop made from an image when the pool names none. */
export const DEFAULT_POOL_SPEC: PoolSpec = { cpu: 1, memory: "2GB", diskSize: "8GB", display: "1280x800" };

export class PoolManager {
  private readonly ctx: PoolContext;
  private readonly claims: PoolClaims;
  private readonly refiller: PoolRefill;
  private readonly health: PoolHealth;
  private readonly syncer: PoolSync;
  private checkTimer?: NodeJS.Timeout;

  constructor(
    private readonly vms: PoolDesktops,
    store: PoolStore,
    log: HostLog,
    private readonly options: PoolManagerOptions = {},
    events?: LifecycleEvents,
  ) {
    this.ctx = new PoolContext(vms, store, log, options, events);
    this.claims = new PoolClaims(this.ctx);
    this.refiller = new PoolRefill(this.ctx, this.claims);
    this.health = new PoolHealth(this.ctx, this.claims);
    this.syncer = new PoolSync(this.ctx, this.claims, this.health);
    this.ctx.refill = (state) => this.refiller.refill(state);
    vms.onChange((name) => {
      if (!this.ctx.leading) return;
      const found = this.ctx.memberOf(name);
      if (found && found.member.state !== "starting") this.ctx.track(this.health.check(found.state, name));
    });
  }

  /** Loads the pools, puts right what a killed service left, and starts refilling. Once at start. */
  async start() {
    await this.syncer.sync();
    if (this.ctx.leading) this.syncer.reconcile();
    this.checkTimer = setInterval(() => this.health.checkAll(), this.options.checkIntervalMs ?? 10_000);
    this.checkTimer.unref();
    if (this.options.shared) this.syncer.scheduleSync();
  }

  /** This service becomes the one that refills, checks and expires claims (it won the election). */
  lead() {
    this.syncer.lead();
  }

  /** Another service leads now. */
  follow() {
    this.syncer.follow();
  }

  async create(request: PoolCreateRequest): Promise<PoolRecord> {
    const name = poolName(request.name);
    if (this.ctx.pools.has(name)) throw new HostError("failed", `Pool already exists with name: ${name}`);
    const { runtime, template } = await this.resolveTemplate(request);
    const sizing =
      request.size !== undefined
        ? { min: request.size, max: request.size, target: request.size }
        : { min: request.min ?? 0, max: request.max ?? 1, target: request.target ?? request.min ?? 0 };
    checkSizing(sizing);
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
      ...sizing,
      ttlSeconds: request.ttl ?? null,
      onExpire: request.onExpire ?? "release",
      idleTimeoutSeconds: request.idleTimeout ?? null,
      createdAt: new Date().toISOString(),
    };
    if (def.onExpire === "hibernate") this.needsSleep(def, "onExpire 'hibernate'");
    await this.ctx.store.createPool(def);
    const state = newState(def);
    this.ctx.pools.set(name, state);
    await this.ctx.log.info("Pool created", {
      pool: name,
      runtime,
      template: describeTemplate(template),
      min: def.min,
      target: def.target,
      max: def.max,
    });
    this.refiller.refill(state);
    return poolRecord(state);
  }

  list(): PoolRecord[] {
    return [...this.ctx.pools.values()].map(poolRecord);
  }

  get(name: string): PoolRecord {
    return poolRecord(this.ctx.state(name));
  }

  /** Changes the sizing (the pool follows in the background), the ttl of new claims, or the rest. */
  async update(name: string, request: PoolUpdateRequest): Promise<PoolRecord> {
    const state = this.ctx.state(name);
    const change = (def: PoolDefinition): PoolDefinition => {
      const sizing =
        request.size !== undefined
          ? { min: request.size, max: request.size, target: request.size }
          : {
              min: request.min ?? def.min,
              max: request.max ?? def.max,
              target: request.target ?? def.target,
            };
      checkSizing(sizing);
      const next = {
        ...def,
        ...sizing,
        ...(request.ttl !== undefined && { ttlSeconds: request.ttl }),
        ...(request.onExpire !== undefined && { onExpire: request.onExpire }),
        ...(request.idleTimeout !== undefined && { idleTimeoutSeconds: request.idleTimeout }),
      };
      if (next.onExpire === "hibernate") this.needsSleep(next, "onExpire 'hibernate'");
      return next;
    };
    change(state.def); // refused before anything is written
    state.def = await this.ctx.store.updatePool(state.def.name, change);
    await this.ctx.log.info("Pool changed", {
      pool: name,
      min: state.def.min,
      target: state.def.target,
      max: state.def.max,
      ttl: state.def.ttlSeconds,
    });
    this.refiller.refill(state);
    return poolRecord(state);
  }

  /** Removes the pool and every desktop of it, claimed ones too. */
  async remove(name: string) {
    const state = this.ctx.state(name);
    state.removed = true;
    clearTimeout(state.retryTimer);
    clearTimeout(state.idleTimer);
    for (const controller of state.starting.values()) controller.abort();
    for (const waiter of state.waiters.splice(0)) waiter.give("");
    state.ready = [];
    const members = [...state.members.keys()].filter((m) => !state.starting.has(m));
    // Starts in progress end by removing what they made.
    await Promise.all([
      ...members.map((member) => this.ctx.destroy(state, member)),
      ...state.startWork.values(),
    ]);
    await this.ctx.store.removePool(name);
    this.ctx.pools.delete(name);
    await this.ctx.log.info("Pool removed", { pool: name, desktops: members.length });
  }

  /**
   * Hands out a ready desktop: at once when the pool has one; an asleep one woken; otherwise waits
   * for the next (up to `timeout` seconds, starting one up to `max`), or answers 503 at once with
   * `wait: false`.
   */
  async claim(name: string, request: ClaimRequest = {}, signal?: AbortSignal): Promise<ClaimedDesktop> {
    if (this.options.shared && !this.ctx.pools.has(name)) await this.syncer.sync(); // made by another service
    return this.claims.claim(this.ctx.state(name), request, signal);
  }

  /** Ends a claim: the desktop is removed and the pool makes a new one in the background. */
  async release(name: string): Promise<{ name: string; pool: string }> {
    // Claimed through another service sharing the store: read it again first.
    if (this.options.shared && this.ctx.memberOf(name)?.member.state !== "claimed") await this.syncer.sync();
    const found = this.ctx.memberOf(name);
    if (!found) {
      throw new HostError("invalid_params", `${name} is not a desktop of a pool: nothing to release`);
    }
    return this.claims.release(found.state, found.member);
  }

  /** Renews a claim's lease (`POST /svc/pools/:name/claims/:id/keepalive`; the id is the desktop's name). */
  async keepalive(pool: string, claim: string, request: KeepaliveRequest = {}) {
    if (this.options.shared) await this.syncer.sync();
    return this.claims.keepalive(this.ctx.state(pool), claim, request);
  }

  /** The pool a desktop belongs to, for records and routes; undefined for other desktops. */
  poolOf(name: string): string | undefined {
    return this.ctx.memberOf(name)?.state.def.name;
  }

  /** The claimed desktops of pools with an idle timeout, and that timeout (seconds): they sleep when idle. */
  claimedIdleTimeouts(): Map<string, number> {
    const timeouts = new Map<string, number>();
    for (const state of this.ctx.pools.values()) {
      const seconds = state.def.idleTimeoutSeconds;
      if (!seconds) continue;
      for (const member of state.members.values()) {
        if (member.state === "claimed") timeouts.set(member.name, seconds);
      }
    }
    return timeouts;
  }

  /** Waits for every start, check and removal in progress (tests and shutdown). */
  settled() {
    return this.ctx.settled();
  }

  /** Stops starting and checking; starts in progress are abandoned (a later start removes them). */
  async close() {
    this.ctx.closed = true;
    clearInterval(this.checkTimer);
    this.syncer.stop();
    for (const timer of this.ctx.ttlTimers.values()) clearTimeout(timer);
    for (const state of this.ctx.pools.values()) {
      clearTimeout(state.retryTimer);
      clearTimeout(state.idleTimer);
      for (const waiter of state.waiters.splice(0)) waiter.give("");
      for (const controller of state.starting.values()) controller.abort();
    }
    await this.ctx.settled();
    await this.ctx.store.close();
  }

  /** A clear 400 when the pool's runtime cannot put desktops to sleep with their memory. */
  private needsSleep(def: PoolDefinition, what: string) {
    if (!canKeepAsleep(this.vms, def.runtime)) {
      throw new HostError(
        "invalid_params",
        `${what} needs desktops that sleep with their memory (QEMU, containers): ${def.runtime} desktops do not`,
      );
    }
  }

  private async resolveTemplate(
    request: PoolCreateRequest,
  ): Promise<{ runtime: PoolDefinition["runtime"]; template: PoolTemplate }> {
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
        if (request.fromSnapshot !== undefined) {
          return {
            runtime: desktop.runtime,
            template: await this.snapshotTemplate(desktop, request.fromSnapshot),
          };
        }
        return { runtime: desktop.runtime, template: { kind: "desktop", name: desktop.name } };
      }
    }
    if (request.fromSnapshot !== undefined) {
      throw new HostError(
        "invalid_params",
        `fromSnapshot needs a template that is a desktop with that snapshot${request.template ? `: ${request.template} is not a desktop` : ""}`,
      );
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
    return { runtime: runtime.kind, template: { kind: "image", image } };
  }

  /** A memory snapshot of the template desktop, whose forks the members are (QEMU). */
  private async snapshotTemplate(
    desktop: { name: string; runtime: PoolDefinition["runtime"] },
    wanted: string,
  ): Promise<PoolTemplate> {
    const snapshot = snapshotName(wanted);
    if (!this.vms.runtime(desktop.runtime).snapshots) {
      throw new HostError(
        "invalid_params",
        `fromSnapshot needs a runtime with memory snapshots (qemu): ${desktop.name} is a ${desktop.runtime} desktop`,
      );
    }
    const found = (await this.vms.listSnapshots(desktop.name)).find((s) => s.name === snapshot);
    if (!found) throw new HostError("invalid_params", `Snapshot not found: ${desktop.name}/${snapshot}`);
    if (!found.memory) {
      throw new HostError(
        "invalid_params",
        `Snapshot ${desktop.name}/${snapshot} holds a disk only: a pool forks a running desktop's snapshot (take it while ${desktop.name} runs)`,
      );
    }
    return { kind: "snapshot", name: desktop.name, snapshot };
  }
}

/** min and target within max: a clear 400 otherwise (the request schema checks what it is given). */
function checkSizing({ min, max, target }: { min: number; max: number; target: number }) {
  if (min > max) throw new HostError("invalid_params", `min (${min}) is more than max (${max})`);
  if (target > max) throw new HostError("invalid_params", `target (${target}) is more than max (${max})`);
}
