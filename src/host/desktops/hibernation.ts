/**
 * Hibernation, as a runtime declares it (docs/host.md#hibernate-and-resume): a desktop put to sleep
 * keeps its identity (name, address, ports, keys, record) and comes back on `resume` or on the
 * first request that reaches it. What comes back depends on the runtime, and the record says which:
 *
 * - `memory`: the running state (RAM, devices, processes) is saved to disk and the runtime's
 *   process ends, so the host's memory is free (QEMU);
 * - `paused`: the engine's freezer stops every process where it is: nothing runs, but the memory
 *   stays held on the host (containers; CRIU cannot checkpoint on this kernel);
 * - `disk`: only the files are kept (a stopped container with its writable layer, a Pod scaled to
 *   zero with its home on its claim); the desktop starts again from them.
 *
 * A runtime that can hibernate says so with `hibernation` (its modes, the first the default), so
 * callers ask `canHibernate(runtime)` (runtime.ts) instead of probing for methods.
 */

export const HIBERNATION_MODES = ["memory", "paused", "disk"] as const;
export type HibernationMode = (typeof HIBERNATION_MODES)[number];

/** What a runtime can keep when a desktop hibernates: its modes, the default first. */
export interface HibernationCapability {
  modes: readonly [HibernationMode, ...HibernationMode[]];
}

/** The record keys of a hibernated desktop (status `hibernated`). */
export interface HibernationState {
  /** What was kept: `memory`, `paused` or `disk`. */
  hibernation: HibernationMode;
  /** When it went to sleep (ISO 8601). */
  hibernatedAt: string | null;
  /** Bytes its saved state takes on the host's disk (0 where nothing was written). */
  hibernationBytes: number;
}
