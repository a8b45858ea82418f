/**
 * Who keeps the pools, and the store read again. With a store of its own the service leads from
 * the start; with a shared one (`--pools-in-cluster`) the elected leader alone refills, checks
 * and expires claims, and every service reads the store again every few seconds to take in what
 * the others changed (members this service is starting or checking keep its own view). A new
 * leader, like a restarted service, removes what the last one left half-started and checks the rest.
 */
import { settled } from "../../common/settled.js";
import type { PoolClaims } from "./pool-claims.js";
import { newState, type PoolContext, type PoolState } from "./pool-context.js";
import type { PoolHealth } from "./pool-health.js";

export class PoolSync {
  private syncTimer?: NodeJS.Timeout;

  constructor(
    private readonly ctx: PoolContext,
    private readonly claims: PoolClaims,
    private readonly health: PoolHealth,
  ) {}

  /** This service becomes the one that refills, checks and expires claims (it won the election). */
  lead() {
    if (this.ctx.leading || this.ctx.closed) return;
    this.ctx.leading = true;
    this.ctx.track(this.sync().then(() => this.reconcile()));
  }

  /** Another service leads now: starts in progress are cancelled (they remove what they made). */
  follow() {
    if (!this.ctx.leading) return;
    this.ctx.leading = false;
    for (const timer of this.ctx.ttlTimers.values()) clearTimeout(timer);
    this.ctx.ttlTimers.clear();
    for (const state of this.ctx.pools.values()) {
      clearTimeout(state.retryTimer);
      clearTimeout(state.idleTimer);
      state.retryTimer = undefined;
      for (const controller of state.starting.values()) controller.abort();
    }
  }

  /** Puts right what a stopped or killed leader left: half-started members removed, the others checked. */
  reconcile() {
    if (!this.ctx.leading || this.ctx.closed) return;
    for (const state of this.ctx.pools.values()) {
      for (const member of [...state.members.values()]) {
        if (member.state === "starting") this.ctx.track(this.health.removeHalfStarted(state, member.name));
        else this.ctx.track(this.health.check(state, member.name));
      }
      this.ctx.refill(state);
    }
  }

  scheduleSync() {
    this.syncTimer = setTimeout(() => {
      void settled(this.sync()).then(() => {
        if (!this.ctx.closed) this.scheduleSync();
      });
    }, this.ctx.options.syncIntervalMs ?? 2000);
    this.syncTimer.unref();
  }

  stop() {
    clearTimeout(this.syncTimer);
  }

  /**
   * Takes in what the store holds now: pools and members added, changed or removed by another
   * service sharing it. Members this service is starting or checking keep its own view.
   */
  async sync() {
    const { ctx } = this;
    const writes = ctx.writes;
    const snapshot = await ctx.store.load();
    // A change written here meanwhile may be missing from what was read: the next sync takes it in.
    if (ctx.closed || writes !== ctx.writes || ctx.writing > 0) return;
    const defs = new Map(snapshot.pools.map((def) => [def.name, def]));
    for (const state of [...ctx.pools.values()]) {
      if (!state.removed && !defs.has(state.def.name)) this.forget(state);
    }
    for (const def of snapshot.pools) {
      const state = ctx.pools.get(def.name);
      if (!state) ctx.pools.set(def.name, newState(def));
      else if (!state.removed) state.def = def;
    }
    const stored = new Map(snapshot.members.map((member) => [member.name, member]));
    const busy = (state: PoolState, name: string) =>
      state.starting.has(name) ||
      state.waking.has(name) ||
      state.sleeping.has(name) ||
      ctx.checking.has(name);
    for (const state of ctx.pools.values()) {
      for (const name of [...state.members.keys()]) {
        if (!stored.has(name) && !busy(state, name)) this.drop(state, name); // removed by another service
      }
    }
    for (const member of snapshot.members) {
      const state = ctx.pools.get(member.pool);
      if (!state || state.removed || busy(state, member.name)) continue;
      state.members.set(member.name, member);
      if (member.state === "claimed" || member.state === "hibernated") {
        state.ready = state.ready.filter((n) => n !== member.name);
        if (member.state === "claimed" && ctx.leading && !ctx.ttlTimers.has(member.name)) {
          this.claims.armTtl(state, member);
        }
      } else if (member.state === "ready" && !state.ready.includes(member.name)) {
        // The leader checked it before it recorded it ready; a follower hands it out as it is.
        if (ctx.leading) ctx.track(this.health.check(state, member.name));
        else this.claims.handOut(state, member.name);
      } else if (member.state === "starting" && ctx.leading) {
        // Only the leader starts members: one that is not ours was left by a previous leader.
        ctx.track(this.health.removeHalfStarted(state, member.name));
      }
    }
    if (ctx.leading) for (const state of ctx.pools.values()) ctx.refill(state);
  }

  /** Forgets a member another service removed. */
  private drop(state: PoolState, name: string) {
    state.members.delete(name);
    state.ready = state.ready.filter((n) => n !== name);
    clearTimeout(this.ctx.ttlTimers.get(name));
    this.ctx.ttlTimers.delete(name);
  }

  /** Forgets a pool another service removed; its starts here are cancelled and remove what they made. */
  private forget(state: PoolState) {
    state.removed = true;
    clearTimeout(state.retryTimer);
    clearTimeout(state.idleTimer);
    for (const controller of state.starting.values()) controller.abort();
    for (const waiter of state.waiters.splice(0)) waiter.give("");
    for (const name of state.members.keys()) {
      clearTimeout(this.ctx.ttlTimers.get(name));
      this.ctx.ttlTimers.delete(name);
    }
    state.ready = [];
    this.ctx.pools.delete(state.def.name);
  }
}
