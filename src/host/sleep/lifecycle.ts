/**
 * The desktops' lifecycle as the VM service sees it happen: one small typed emitter, so that what
 * watches desktops (pools, an event stream, metrics) hooks in without the service knowing of them.
 * Listeners are called in order, synchronously; one that throws is passed over.
 */
import type { HibernationMode } from "../desktops/hibernation.js";
import type { RuntimeKind } from "../desktops/kinds.js";

export type LifecycleEvent = { name: string; runtime: RuntimeKind; at: string } & (
  | { type: "created" | "started" | "stopped" | "deleted" }
  /** Its computer server answered, `ms` after the start. */
  | { type: "ready"; ms: number }
  /** `why`: what put it to sleep on its own (auto-pause when idle); absent when asked to. */
  | { type: "hibernated"; mode: HibernationMode; ms: number; why?: string }
  /** Resumed on request (`resume`, `run`), or woken by traffic (`woke`, with why). */
  | { type: "resumed"; ms: number }
  | { type: "woke"; ms: number; why: string }
  | { type: "failed"; operation: "hibernate" | "resume"; error: string }
);

export type LifecycleType = LifecycleEvent["type"];
type Listener = (event: LifecycleEvent) => void;
/** An event as emitted: `at` is added. */
type Emitted = LifecycleEvent extends infer E ? (E extends LifecycleEvent ? Omit<E, "at"> : never) : never;

export class Lifecycle {
  private readonly listeners = new Set<Listener>();

  /** Calls `listener` with every event from now on; the function returned stops that. */
  on(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(event: Emitted) {
    const full = { ...event, at: new Date().toISOString() } as LifecycleEvent;
    for (const listener of this.listeners) {
      try {
        listener(full);
      } catch {
        // a listener's failure is its own
      }
    }
  }
}
