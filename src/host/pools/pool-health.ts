/**
 * Watching pool members' desktops: each is looked at when its runtime says it changed and every
 * few seconds. A desktop gone, or stopped while unclaimed, is removed and replaced; one put to
 * sleep or woken from outside is recorded so; a claimed one keeps its lease timer; a ready one not
 * yet handed out since a restart is handed out once it answers. An engine that cannot be reached
 * changes nothing.
 */

import type { DesktopRecord } from "../desktops/desktop-record.js";
import { HostError } from "../errors.js";
import type { PoolClaims } from "./pool-claims.js";
import type { PoolContext, PoolState } from "./pool-context.js";

export class PoolHealth {
  constructor(
    private readonly ctx: PoolContext,
    private readonly claims: PoolClaims,
  ) {}

  checkAll() {
    if (!this.ctx.leading) return;
    for (const state of this.ctx.pools.values()) {
      for (const member of state.members.values()) {
        if (member.state !== "starting") this.ctx.track(this.check(state, member.name));
      }
    }
  }

  async check(state: PoolState, name: string) {
    const { ctx } = this;
    if (ctx.checking.has(name) || ctx.closed || !ctx.leading) return;
    if (state.waking.has(name) || state.sleeping.has(name)) return; // ours, under way
    ctx.checking.add(name);
    try {
      const member = state.members.get(name);
      if (!member || member.state === "starting") return;
      let record: DesktopRecord | undefined;
      try {
        record = await ctx.vms.find(name);
      } catch (err) {
        if (!(err instanceof HostError) || err.kind !== "not_found") return; // unreachable: later
      }
      const now = state.members.get(name);
      if (!now || now.state === "starting") return;
      const lost =
        !record ||
        (now.state === "ready" && record.status === "stopped") ||
        (now.state === "hibernated" && record.status === "stopped");
      if (lost) {
        await ctx.log.info("A pool desktop stopped or vanished; it is replaced", {
          pool: state.def.name,
          vm: name,
          state: now.state,
        });
        await ctx.destroy(state, name, Boolean(record));
        ctx.refill(state);
        return;
      }
      if (now.state === "claimed") {
        if (!ctx.ttlTimers.has(name)) this.claims.armTtl(state, now);
        return;
      }
      if (record?.status === "hibernated" && now.state === "ready") {
        // Put to sleep from outside: no longer handed out as ready; the pool may wake it.
        const asleep = await ctx.store
          .updateMember(name, (m) => (m.state === "ready" ? { ...m, state: "hibernated" as const } : m))
          .catch(() => undefined);
        if (asleep) state.members.set(name, asleep);
        state.ready = state.ready.filter((n) => n !== name);
        ctx.refill(state);
        return;
      }
      if (record?.status === "running" && now.state === "hibernated") {
        // Woken from outside (a request to it): ready again.
        const ready = await ctx.store
          .updateMember(name, (m) =>
            m.state === "hibernated"
              ? { ...m, state: "ready" as const, readyAt: new Date().toISOString() }
              : m,
          )
          .catch(() => undefined);
        if (ready) state.members.set(name, ready);
      }
      if (state.members.get(name)?.state === "ready" && !state.ready.includes(name)) {
        // Ready before a restart: handed out again once its computer server answers.
        await ctx.vms.waitReady(name, 30_000).then(
          (record) => {
            if (state.members.get(name)?.state === "ready" && !state.ready.includes(name)) {
              this.claims.handOut(state, name, record);
            }
          },
          async (err: Error) => {
            if (
              err instanceof HostError &&
              err.kind === "unavailable" &&
              /not ready after/.test(err.message)
            ) {
              await ctx.destroy(state, name, true);
              ctx.refill(state);
            }
          },
        );
      }
    } finally {
      ctx.checking.delete(name);
    }
  }

  /** Removes a member a stopped or killed leader left half-started. */
  async removeHalfStarted(state: PoolState, name: string) {
    const { ctx } = this;
    if (state.starting.has(name) || ctx.checking.has(name)) return; // being started here
    ctx.checking.add(name);
    try {
      await ctx.log.info("Removing a pool desktop a stopped service left half-started", {
        pool: state.def.name,
        vm: name,
      });
      await ctx.destroy(state, name);
      ctx.refill(state);
    } finally {
      ctx.checking.delete(name);
    }
  }
}
