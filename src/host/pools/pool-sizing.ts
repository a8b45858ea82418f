/**
 * How a pool follows demand, as arithmetic on its counts (no desktops, no store, no time): what to
 * start, wake, put to sleep or remove so that `target` unclaimed desktops are awake and ready, at
 * least `min` unclaimed ones exist (those beyond `target` asleep, where the runtime can hibernate)
 * and never more than `max`. Claims that wait count as demand: a pool whose ready desktops are all
 * taken starts (or wakes) one per waiting claim, up to `max`.
 */

export interface Sizing {
  min: number;
  max: number;
  target: number;
}

/** A pool's unclaimed desktops, and the claims waiting for one. */
export interface PoolCounts {
  /** Awake, answering, not claimed. */
  ready: number;
  /** Being made, started or woken. */
  starting: number;
  /** Asleep, not claimed. */
  asleep: number;
  /** Claims waiting for a ready desktop. */
  waiting: number;
}

export interface PoolPlan {
  /** Asleep desktops to wake. */
  wake: number;
  /** New desktops to make. */
  start: number;
  /** Ready desktops beyond the target: to put to sleep (as standby) … */
  sleep: number;
  /** … or to remove (once idle, where the pool has an idle time). */
  removeReady: number;
  /** Asleep desktops beyond what is kept. */
  removeAsleep: number;
}

export function planPool(sizing: Sizing, counts: PoolCounts, canSleep: boolean): PoolPlan {
  const { ready, starting, asleep, waiting } = counts;
  const unclaimed = ready + starting + asleep;
  // Desktops wanted awake: the target, plus one for each waiting claim (they take theirs first).
  const short = Math.max(0, sizing.target + waiting - ready - starting);
  const wake = Math.min(short, asleep);
  let start = Math.min(short - wake, Math.max(0, sizing.max - unclaimed));
  // Too few in all: more are made (those beyond the target then sleep, or stay awake).
  start += Math.max(0, Math.min(sizing.min - unclaimed - start, sizing.max - unclaimed - start));
  // Kept asleep as standby: what min asks beyond the target.
  const standby = canSleep ? Math.max(0, sizing.min - sizing.target) : 0;
  const stillAsleep = asleep - wake;
  const excessReady = waiting > 0 ? 0 : Math.max(0, ready - sizing.target);
  const sleep = Math.min(excessReady, Math.max(0, standby - stillAsleep));
  // Removed only down to min, counting what is still on its way.
  let removable = Math.max(0, unclaimed + start - sizing.min);
  const removeAsleep = Math.min(Math.max(0, stillAsleep - standby), removable);
  removable -= removeAsleep;
  const removeReady = Math.min(excessReady - sleep, removable);
  return { wake, start, sleep, removeReady, removeAsleep };
}
