/**
 * Giving memory back after work: a timer that fires once after a quiet spell (each `touch()` pushes
 * it back), and a full garbage collection for that moment.
 */
import { getHeapStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** Seconds of quiet after which caches are dropped and the heap is collected. */
export const IDLE_RELEASE_MS = 5_000;

/**
 * When the server collects garbage after a quiet spell: a second after the caches (screen captures,
 * encodings) have let go, which their own timers, touched a little later in each request, do at
 * `IDLE_RELEASE_MS`. Collected before them, 24 MB of pixels waited for V8's next collection.
 */
export const IDLE_COLLECT_MS = IDLE_RELEASE_MS + 1_000;

/**
 * A shorter quiet spell after which the heap is collected only if it grew by `GREW_BY` since the
 * last collection here: what a burst (32 connections of `version`, a run of screenshots) left in the
 * old generation, which V8 lets grow to 2.5 times what lives there before it marks
 * (`--heap-growing-percent=150`), is given back in the first pause instead of at the next burst.
 * Traced after `bench/compare.ts`: 44 MB of old generation, 17 MB of it alive.
 */
export const QUIET_COLLECT_MS = 2_000;
const GREW_BY = 16 * 1024 * 1024;

export interface IdleTimer {
  /** Activity: the quiet spell starts again from now. */
  touch(): void;
  cancel(): void;
}

/** Calls `onIdle` once `ms` after the last `touch()`; never keeps the process alive. */
export function idleTimer(ms: number, onIdle: () => void): IdleTimer {
  let timer: NodeJS.Timeout | undefined;
  return {
    touch() {
      if (timer) {
        timer.refresh();
        return;
      }
      timer = setTimeout(() => {
        timer = undefined;
        onIdle();
      }, ms);
      timer.unref();
    },
    cancel() {
      clearTimeout(timer);
      timer = undefined;
    },
  };
}

let gc: (() => void) | undefined;
/** The heap in use right after the last `collectGarbage()`. */
let usedAfterCollection = 0;

/**
 * A full, compacting garbage collection now. V8 frees the pages it no longer needs and the
 * allocator returns large freed buffers to the system, so the resident size falls back soon after
 * a burst of large replies instead of whenever V8's own memory reducer next runs.
 */
export function collectGarbage() {
  if (!gc) {
    setFlagsFromString("--expose-gc");
    gc = runInNewContext("gc") as () => void;
  }
  gc();
  usedAfterCollection = getHeapStatistics().used_heap_size;
}

/** `collectGarbage()` if the heap holds `GREW_BY` more than after the last one; whether it did. */
export function collectGarbageIfGrown(): boolean {
  if (getHeapStatistics().used_heap_size < usedAfterCollection + GREW_BY) return false;
  collectGarbage();
  return true;
}
