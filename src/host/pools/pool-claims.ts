/**
 * Claims of pool desktops: handing one out (a ready one at once; an asleep one woken; else the
 * next to become ready, or a 503), releasing it, and its lease: a claim with a ttl ends by itself
 * (`onExpire`: released, or put to sleep and kept), a keepalive renews it, and the time its
 * desktop sleeps is not counted against it (the lease waits while it sleeps, from the desktops'
 * lifecycle events, and goes on from where it was when it wakes).
 */

import type { DesktopRecord } from "../desktops/desktop-record.js";
import { probeStatus } from "../desktops/readiness.js";
import { HostError } from "../errors.js";
import type { ClaimRequest, KeepaliveRequest } from "../requests.js";
import type { LifecycleEvent } from "../sleep/lifecycle.js";
import type { PoolContext, PoolState, Waiter } from "./pool-context.js";
import type { ClaimInfo, PoolMember } from "./pool-types.js";

/** What a claim answers: the desktop's record, its pool and the claim. */
export type ClaimedDesktop = DesktopRecord & { pool: string; claim: ClaimInfo };

const DEFAULT_CLAIM_WAIT_S = 60;

export class PoolClaims {
  constructor(private readonly ctx: PoolContext) {
    ctx.vms.lifecycle.on((event) => this.lifecycle(event));
  }

  /**
   * Hands out a ready desktop: at once when the pool has one; an asleep one woken when it has
   * none ready; otherwise waits for the next (up to `timeout` seconds), or answers 503 at once
   * with `wait: false`.
   */
  async claim(state: PoolState, request: ClaimRequest = {}, signal?: AbortSignal): Promise<ClaimedDesktop> {
    const waitMs = request.wait === false ? 0 : (request.timeout ?? DEFAULT_CLAIM_WAIT_S) * 1000;
    const started = Date.now();
    const deadline = started + waitMs;
    const handed = (claimed: ClaimedDesktop) => {
      // The replacement is started once this claim is answered: its start (the engine's calls, the
      // store's write) never comes before the claim's own.
      setImmediate(() => this.ctx.refill(state));
      this.ctx.events?.emit("claim", {
        desktop: claimed.name,
        runtime: claimed.runtime,
        pool: state.def.name,
        ms: Date.now() - started,
      });
      return claimed;
    };
    for (;;) {
      let candidate = state.ready.shift();
      if (candidate === undefined) {
        const asleep = this.asleep(state);
        if (asleep) {
          const woken = await this.tryClaim(state, asleep, request, "hibernated");
          if (woken) return handed(woken);
          continue;
        }
        const left = deadline - Date.now();
        if (left <= 0 || state.removed) throw this.exhausted(state, waitMs);
        candidate = await this.nextReady(state, left, signal);
        if (candidate === undefined) {
          if (signal?.aborted) throw new HostError("cancelled", "The claim was cancelled");
          throw this.exhausted(state, waitMs);
        }
      }
      const claimed = await this.tryClaim(state, candidate, request, "ready");
      if (claimed) return handed(claimed);
    }
  }

  /** Ends a claim: the desktop is removed and the pool makes a new one in the background. */
  async release(state: PoolState, member: PoolMember): Promise<{ name: string; pool: string }> {
    if (member.state !== "claimed") {
      throw new HostError(
        "invalid_params",
        `${member.name} is not claimed: it waits in pool ${state.def.name} (claim it first)`,
      );
    }
    // The claim ends here; removing the desktop (its `delete` event) follows.
    this.ctx.events?.emit("release", {
      desktop: member.name,
      runtime: state.def.runtime,
      pool: state.def.name,
    });
    await this.ctx.destroy(state, member.name);
    await this.ctx.log.info("Pool desktop released", { pool: state.def.name, vm: member.name });
    this.ctx.refill(state);
    return { name: member.name, pool: state.def.name };
  }

  /**
   * Renews a claim's lease by `ttl` seconds from now (its own ttl when left out); a claim whose
   * desktop sleeps gets that much once it wakes. A claim with no ttl lasts until released: a
   * keepalive with `ttl` gives it one.
   */
  async keepalive(state: PoolState, name: string, request: KeepaliveRequest) {
    const member = state.members.get(name);
    if (member?.state !== "claimed" || !member.claim) {
      throw new HostError(
        "not_found",
        `No claim ${name} in pool ${state.def.name}: give the claimed desktop's name`,
      );
    }
    const ttl = request.ttl ?? member.claim.ttlSeconds ?? state.def.ttlSeconds;
    if (!ttl) {
      throw new HostError(
        "invalid_params",
        `The claim of ${name} has no ttl: it lasts until released (give ttl to give it one)`,
      );
    }
    const renewed = await this.ctx.store.updateMember(name, (m) => {
      if (m.state !== "claimed" || !m.claim) throw new HostError("not_found", `${name} is no longer claimed`);
      const asleep = Boolean(m.claim.pausedAt);
      return {
        ...m,
        claim: {
          ...m.claim,
          ttlSeconds: ttl,
          expiresAt: asleep ? null : new Date(Date.now() + ttl * 1000).toISOString(),
          ...(asleep && { remainingMs: ttl * 1000 }),
        },
      };
    });
    state.members.set(name, renewed);
    this.armTtl(state, renewed);
    return { name, pool: state.def.name, claim: renewed.claim as ClaimInfo };
  }

  /** Starts the timer that ends a claim when its lease runs out (the leader's job). */
  armTtl(state: PoolState, member: PoolMember) {
    clearTimeout(this.ctx.ttlTimers.get(member.name));
    this.ctx.ttlTimers.delete(member.name);
    if (!this.ctx.leading) return;
    const expiresAt = member.claim?.expiresAt;
    if (!expiresAt || member.claim?.pausedAt) return;
    // setTimeout holds at most 2^31-1 ms; a longer ttl is armed again when that runs out.
    const ms = Math.min(Math.max(0, Date.parse(expiresAt) - Date.now()), 2 ** 31 - 1);
    const timer = setTimeout(() => {
      this.ctx.ttlTimers.delete(member.name);
      const now = state.members.get(member.name);
      if (now?.state !== "claimed" || now.claim?.pausedAt) return;
      if (Date.parse(now.claim?.expiresAt ?? "") > Date.now()) return this.armTtl(state, now);
      this.ctx.track(this.expire(state, now));
    }, ms);
    timer.unref();
    this.ctx.ttlTimers.set(member.name, timer);
  }

  /**
   * Wakes the next claim waiting for this pool with a desktop that became ready, else lists it
   * ready; `record` is the desktop's as it became ready (without one, a claim looks it up).
   */
  handOut(state: PoolState, name: string, record?: DesktopRecord) {
    if (record) state.records.set(name, record);
    else state.records.delete(name);
    const waiter = state.waiters.shift();
    if (waiter) waiter.give(name);
    else if (!state.ready.includes(name)) state.ready.push(name);
  }

  private async expire(state: PoolState, member: PoolMember) {
    const hibernate = state.def.onExpire === "hibernate" && this.ctx.canSleep(state);
    await this.ctx.log.info(
      hibernate
        ? "Pool claim expired: the desktop is put to sleep"
        : "Pool claim expired: the desktop is released",
      { pool: state.def.name, vm: member.name, by: member.claim?.by ?? undefined },
    );
    if (hibernate) {
      const slept = await this.ctx.vms.hibernate(member.name).then(
        () => true,
        (err: Error) => {
          if (err instanceof HostError && err.kind === "conflict" && /already hibernated/.test(err.message)) {
            return true;
          }
          void this.ctx.log.error("A claimed desktop could not be put to sleep; it is released", {
            pool: state.def.name,
            vm: member.name,
            error: err.message,
          });
          return false;
        },
      );
      if (slept) return;
    }
    await this.ctx.destroy(state, member.name);
    this.ctx.refill(state);
  }

  /** A claimed desktop fell asleep (its lease waits) or woke (its lease goes on). */
  private lifecycle(event: LifecycleEvent) {
    if (event.type !== "hibernated" && event.type !== "resumed" && event.type !== "woke") return;
    const found = this.ctx.memberOf(event.name);
    if (found?.member.state !== "claimed" || !found.member.claim) return;
    const { state } = found;
    const asleep = event.type === "hibernated";
    this.ctx.track(
      this.ctx.store
        .updateMember(event.name, (m) => {
          if (m.state !== "claimed" || !m.claim) return m;
          if (asleep) {
            if (m.claim.pausedAt) return m;
            const left = m.claim.expiresAt ? Date.parse(m.claim.expiresAt) - Date.now() : null;
            return { ...m, claim: { ...m.claim, expiresAt: null, pausedAt: event.at, remainingMs: left } };
          }
          if (!m.claim.pausedAt) return m;
          // What was left of the lease; one that ran out (it slept because it expired) starts again.
          const ttlMs = (m.claim.ttlSeconds ?? state.def.ttlSeconds ?? 0) * 1000;
          const left = m.claim.remainingMs && m.claim.remainingMs > 0 ? m.claim.remainingMs : ttlMs;
          return {
            ...m,
            claim: {
              ...m.claim,
              pausedAt: null,
              remainingMs: null,
              expiresAt: left > 0 ? new Date(Date.now() + left).toISOString() : null,
            },
          };
        })
        .then((member) => {
          state.members.set(member.name, member);
          if (asleep) {
            clearTimeout(this.ctx.ttlTimers.get(member.name));
            this.ctx.ttlTimers.delete(member.name);
          } else this.armTtl(state, member);
        }),
    );
  }

  /** An asleep, unclaimed member nobody is waking or putting to sleep now. */
  private asleep(state: PoolState): string | undefined {
    for (const member of state.members.values()) {
      if (
        member.state === "hibernated" &&
        !state.waking.has(member.name) &&
        !state.sleeping.has(member.name)
      ) {
        return member.name;
      }
    }
    return undefined;
  }

  /**
   * Claims `name` in the store and makes sure it answers, side by side: a ready member kept its
   * record from when it became ready, and answers when its computer server does (asked straight,
   * not through the runtime's engine, which the refills' starts keep busy); an asleep one is woken.
   * Undefined when it was taken meanwhile, or does not answer (then it is replaced).
   */
  private async tryClaim(
    state: PoolState,
    name: string,
    request: ClaimRequest,
    from: "ready" | "hibernated",
  ): Promise<ClaimedDesktop | undefined> {
    const started = performance.now();
    const at = new Date();
    const ttl = request.ttl ?? state.def.ttlSeconds;
    const claim: ClaimInfo = {
      by: request.owner ?? null,
      at: at.toISOString(),
      expiresAt: ttl ? new Date(at.getTime() + ttl * 1000).toISOString() : null,
      ttlSeconds: ttl ?? null,
      pausedAt: null,
      remainingMs: null,
    };
    const kept = state.records.get(name);
    state.records.delete(name);
    let storeMs = 0;
    const written = this.ctx.store
      .updateMember(name, (m) => {
        if (m.state !== from) throw new HostError("failed", `${name} is no longer ${from}`);
        return { ...m, state: "claimed", claim };
      })
      .finally(() => {
        storeMs = performance.now() - started;
      });
    const answering = from === "hibernated" ? undefined : kept && this.answering(kept);
    let member: PoolMember;
    try {
      member = await written;
    } catch {
      return undefined; // taken, or gone: the next one
    }
    state.members.set(name, member);
    this.armTtl(state, member);
    let record: DesktopRecord | undefined;
    if (from === "hibernated") {
      record = await this.ctx.vms.ensureAwake(name, `a claim of pool ${state.def.name}`).then(
        (awake) => awake.record,
        () => undefined,
      );
    } else if (answering) {
      record = await answering;
    } else {
      record = await this.ctx.vms.find(name).catch(() => undefined);
    }
    if (record?.status !== "running") {
      // It stopped while it waited in the pool (or could not be woken): not something to hand out.
      void this.ctx.log.info("A pool desktop could not be handed out; it is replaced", {
        pool: state.def.name,
        vm: name,
      });
      this.ctx.track(this.ctx.destroy(state, name).then(() => this.ctx.refill(state)));
      return undefined;
    }
    void this.ctx.log.info("Pool desktop claimed", {
      pool: state.def.name,
      vm: name,
      by: claim.by ?? undefined,
      expiresAt: claim.expiresAt ?? undefined,
      woken: from === "hibernated" || undefined,
      ms: Math.round(performance.now() - started),
      storeMs: Math.round(storeMs),
    });
    return { ...record, pool: state.def.name, claim };
  }

  /**
   * The kept record when its desktop answers now; a look through the runtime instead where that
   * costs no engine call (its records are the host's files: a round trip to a guest under TCG
   * costs more) or where it has no server URL.
   */
  private async answering(record: DesktopRecord): Promise<DesktopRecord | undefined> {
    const { answers } = this.ctx.options;
    const url = record.computerServerUrl;
    const local = this.ctx.vms.runtime(record.runtime).localRecords;
    if (local || (!answers && !url)) return this.ctx.vms.find(record.name).catch(() => undefined);
    const yes = answers ? answers(record) : probeStatus(url as string, new AbortController().signal);
    return (await yes.catch(() => false)) ? record : undefined;
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
        this.ctx.refill(state);
      };
      const timer = setTimeout(cancel, ms);
      signal?.addEventListener("abort", cancel, { once: true });
      state.waiters.push(waiter);
      // A waiting claim is demand: the pool may start one for it (up to max).
      this.ctx.refill(state);
    });
  }

  private exhausted(state: PoolState, waitedMs: number) {
    const starting = state.starting.size + state.waking.size;
    const why = state.lastError && starting === 0 ? `; the last start failed: ${state.lastError}` : "";
    return new HostError(
      "exhausted",
      waitedMs > 0
        ? `Pool ${state.def.name} had no ready desktop within ${waitedMs / 1000} s (${starting} starting${why})`
        : `Pool ${state.def.name} has no ready desktop now (${starting} starting${why}); claim with wait to wait for one`,
    );
  }
}
