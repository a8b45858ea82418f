/**
 * Keeping a pool at its size (pool-sizing.ts says how many): new members made (cloned, made from
 * an image, or forked from a memory snapshot) and started until they answer; asleep ones woken
 * when ready ones are wanted; ready ones beyond the target put to sleep as standby or removed,
 * once idle for the pool's idle time. Only the leader does this; failed starts back off.
 */
import { randomBytes } from "node:crypto";
import { availableParallelism } from "node:os";
import { warmUp } from "../desktops/warm-up.js";
import { HostError } from "../errors.js";
import type { PoolClaims } from "./pool-claims.js";
import type { PoolContext, PoolState } from "./pool-context.js";
import { planPool } from "./pool-sizing.js";
import type { PoolMember } from "./pool-types.js";

/** How long a started desktop may take to answer its warm-up screenshots. */
const WARM_UP_TIMEOUT_MS = 60_000;
/**
 * Desktops started at once when the options do not say (PoolManagerOptions.maxStarting): on this
 * host, as many as it has CPUs (at least 2); on a cluster, whose nodes do the work, 4.
 */
const LOCAL_MAX_STARTING = Math.max(2, availableParallelism());
const CLUSTER_MAX_STARTING = 4;
/** After a failed start, the next waits 1 s, then 2, 4 … up to a minute. */
const MAX_BACKOFF_MS = 60_000;

export class PoolRefill {
  constructor(
    private readonly ctx: PoolContext,
    private readonly claims: PoolClaims,
  ) {}

  /** Starts, wakes, puts to sleep or removes members until the pool is at its size. */
  refill(state: PoolState) {
    if (state.removed || this.ctx.closed || !this.ctx.leading) return;
    const members = [...state.members.values()];
    const plan = planPool(
      state.def,
      {
        ready: state.ready.length,
        starting: state.starting.size + state.waking.size,
        asleep: members.filter((m) => m.state === "hibernated" && !state.waking.has(m.name)).length,
        waiting: state.waiters.length,
      },
      this.ctx.canSleep(state),
    );
    const limit =
      this.ctx.options.maxStarting ??
      (state.def.runtime === "kubernetes" ? CLUSTER_MAX_STARTING : LOCAL_MAX_STARTING);
    for (const name of this.asleepMembers(state).slice(0, plan.wake)) {
      if (this.ctx.startingCount() >= limit) break;
      this.wake(state, name);
    }
    for (const name of this.asleepMembers(state).slice(0, plan.removeAsleep)) {
      this.ctx.track(this.retire(state, name, "hibernated"));
    }
    this.trimReady(state, plan.sleep, plan.removeReady);
    const wait = state.retryAt - Date.now();
    if (plan.start > 0 && wait > 0) {
      if (!state.retryTimer) {
        state.retryTimer = setTimeout(() => {
          state.retryTimer = undefined;
          this.refill(state);
        }, wait);
        state.retryTimer.unref();
      }
      return;
    }
    for (let missing = plan.start; missing > 0; missing--) {
      if (this.ctx.startingCount() >= limit) return;
      this.startMember(state);
    }
  }

  refillAll() {
    for (const state of this.ctx.pools.values()) this.refill(state);
  }

  /**
   * Ready members beyond the target, newest first: put to sleep (`sleep` of them) or removed
   * (`remove`), each once it has been idle for the pool's idle time (at once without one).
   */
  private trimReady(state: PoolState, sleep: number, remove: number) {
    clearTimeout(state.idleTimer);
    state.idleTimer = undefined;
    const idleMs = (state.def.idleTimeoutSeconds ?? 0) * 1000;
    let nextDue = Number.POSITIVE_INFINITY;
    const excess = [...state.ready].reverse().slice(0, sleep + remove);
    excess.forEach((name, index) => {
      const since = Date.parse(state.members.get(name)?.readyAt ?? "") || 0;
      const due = since + idleMs;
      if (due > Date.now()) {
        nextDue = Math.min(nextDue, due);
        return;
      }
      state.ready = state.ready.filter((n) => n !== name);
      if (index < sleep) this.ctx.track(this.sleep(state, name));
      else this.ctx.track(this.retire(state, name, "ready"));
    });
    if (Number.isFinite(nextDue)) {
      state.idleTimer = setTimeout(() => this.refill(state), Math.max(10, nextDue - Date.now()));
      state.idleTimer.unref();
    }
  }

  private asleepMembers(state: PoolState): string[] {
    return [...state.members.values()]
      .filter((m) => m.state === "hibernated" && !state.waking.has(m.name) && !state.sleeping.has(m.name))
      .map((m) => m.name);
  }

  /** Wakes an asleep member; it is ready (and handed out) once it answers. */
  private wake(state: PoolState, name: string) {
    state.waking.add(name);
    this.ctx.track(
      (async () => {
        try {
          const awake = await this.ctx.vms.ensureAwake(name, `pool ${state.def.name} wants it ready`);
          const ready = await this.ctx.store.updateMember(name, (m) => {
            if (m.state !== "hibernated") throw new HostError("failed", `${name} is no longer asleep`);
            return { ...m, state: "ready" as const, readyAt: new Date().toISOString() };
          });
          state.members.set(name, ready);
          this.claims.handOut(state, name, awake.record);
        } catch (err) {
          if (state.members.get(name)?.state === "hibernated") {
            await this.ctx.log.error("An asleep pool desktop could not be woken; it is replaced", {
              pool: state.def.name,
              vm: name,
              error: (err as Error).message,
            });
            await this.ctx.destroy(state, name);
          }
        } finally {
          state.waking.delete(name);
          this.refill(state);
        }
      })(),
    );
  }

  /**
   * Puts a ready member to sleep, unless it was claimed meanwhile (through another service sharing
   * the store): recorded asleep first, so that no claim takes it as ready.
   */
  private async sleep(state: PoolState, name: string) {
    if (this.ctx.checking.has(name)) return;
    state.sleeping.add(name);
    try {
      const member = await this.ctx.store
        .updateMember(name, (m) => {
          if (m.state !== "ready") throw new HostError("failed", `${name} is no longer ready`);
          return { ...m, state: "hibernated" as const };
        })
        .catch(() => undefined);
      if (!member) return;
      state.members.set(name, member);
      try {
        await this.ctx.vms.hibernate(name);
        await this.ctx.log.info("Pool desktop beyond the target put to sleep", {
          pool: state.def.name,
          vm: name,
        });
      } catch (err) {
        await this.ctx.log.error("A pool desktop could not be put to sleep; it is removed", {
          pool: state.def.name,
          vm: name,
          error: (err as Error).message,
        });
        await this.ctx.destroy(state, name);
      }
    } finally {
      state.sleeping.delete(name);
      this.refill(state);
    }
  }

  /**
   * Removes an unclaimed member unless another service sharing the store claimed it meanwhile: it
   * is first recorded as starting (no claim takes it; a leader that dies here leaves it
   * half-started, which the next one removes).
   */
  private async retire(state: PoolState, name: string, from: "ready" | "hibernated") {
    if (this.ctx.checking.has(name)) return;
    this.ctx.checking.add(name);
    try {
      const member = await this.ctx.store
        .updateMember(name, (m) => {
          if (m.state !== from) throw new HostError("failed", `${name} is no longer ${from}`);
          return { ...m, state: "starting" as const };
        })
        .catch(() => undefined);
      if (!member) return; // claimed or gone: not ours to remove
      state.members.set(name, member);
      await this.ctx.destroy(state, name);
    } finally {
      this.ctx.checking.delete(name);
    }
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
      state.startSteps.delete(name);
      this.refillAll();
    });
    state.startWork.set(name, work);
    this.ctx.track(work);
  }

  private async makeReady(state: PoolState, member: PoolMember, signal: AbortSignal) {
    const { def } = state;
    const { vms } = this.ctx;
    const name = member.name;
    const started = Date.now();
    let made = false;
    const phases: Record<string, number> = {};
    let last = performance.now();
    /** Ends a phase (its time goes to the log line) and names the next (the pool's record shows it). */
    const phase = (what: string, next: string) => {
      const now = performance.now();
      phases[what] = Math.round(now - last);
      last = now;
      state.startSteps.set(name, { step: next, since: Date.now() });
    };
    state.startSteps.set(name, { step: "recording it", since: Date.now() });
    try {
      await this.ctx.store.addMember(member);
      phase("addMs", "making it");
      signal.throwIfAborted();
      const { template } = def;
      if (template.kind === "snapshot") {
        // A fork resumes the snapshot's running state: made and started in one step.
        await vms.fork(template.name, { snapshot: template.snapshot, names: [name] });
        made = true;
      } else {
        if (template.kind === "desktop") await vms.clone({ name: template.name, newName: name });
        else
          await vms.create({ name, runtime: def.runtime, image: template.image, os: "linux", ...def.spec });
        made = true;
        phase("createMs", "starting it");
        signal.throwIfAborted();
        await vms.run(name, {});
      }
      phase("runMs", "waiting for its computer server");
      const record = await vms.waitReady(name, this.ctx.options.startTimeoutMs ?? 600_000, signal);
      phase("waitMs", "warming it up");
      signal.throwIfAborted();
      // Ready only once warm: its first screenshots answered (warm-up.ts); a desktop that does not
      // answer them is a failed start. A claim already waiting for it gets it at once instead: the
      // warm-up would be the claimant's own first screenshots, taken while it waits.
      const claimWaits = state.waiters.length > 0;
      if (
        this.ctx.options.warmUp !== false &&
        !claimWaits &&
        (await warmUp(record, WARM_UP_TIMEOUT_MS, { signal })) === "no commands"
      ) {
        void this.ctx.log.info("A pool desktop's server has no commands (/cmd): nothing to warm up", {
          pool: def.name,
          vm: name,
        });
      }
      phase("warmMs", "recording it ready");
      signal.throwIfAborted();
      const ready = await this.ctx.store.updateMember(name, (m) => ({
        ...m,
        state: "ready",
        readyAt: new Date().toISOString(),
      }));
      phase("readyMs", "handing it out");
      state.members.set(name, ready);
      state.failures = 0;
      state.lastError = null;
      state.retryAt = 0;
      void this.ctx.log.info("Pool desktop ready", {
        pool: def.name,
        vm: name,
        ms: Date.now() - started,
        ...phases,
        ...(claimWaits && { forWaitingClaim: true }),
      });
      this.claims.handOut(state, name, record);
    } catch (err) {
      const cancelled = signal.aborted || this.ctx.closed || state.removed;
      if (!cancelled) {
        state.failures++;
        state.lastError = (err as Error).message;
        state.retryAt = Date.now() + Math.min(MAX_BACKOFF_MS, 1000 * 2 ** (state.failures - 1));
        this.ctx.events?.emit("failure", {
          desktop: name,
          runtime: def.runtime,
          pool: def.name,
          error: `pool desktop failed to start: ${state.lastError}`,
        });
        await this.ctx.log.error("Pool desktop failed to start", {
          pool: def.name,
          vm: name,
          error: state.lastError,
          retryInMs: state.retryAt - Date.now(),
        });
      }
      // A closing service leaves it: the next start removes what was half-started.
      if (!this.ctx.closed) await this.ctx.destroy(state, name, made);
    }
  }
}
