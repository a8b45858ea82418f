/**
 * The tail of a queue of work: a promise that settles when `work` does, never rejects, and keeps
 * nothing of its value. `work.catch(() => undefined)` resolves to work's value, so a queue built
 * that way held its last result (a capture's 8 MB of pixels) until the next task replaced it.
 */
export function settled(work: Promise<unknown>): Promise<void> {
  return work.then(nothing, nothing);
}

const nothing = () => undefined;

/** Whether a value is a promise (or another thenable) rather than a value given at once. */
export function isPromise(value: unknown): value is PromiseLike<unknown> & Promise<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === "function";
}
