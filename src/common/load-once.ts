/**
 * Something loaded at its first use and kept (a module, the app built from it). The loads in
 * flight are shared; a load that failed is not kept, so the next use tries again.
 */
export interface LoadOnce<T> {
  /** The loaded value, loading it first when needed. */
  get(): Promise<T>;
  /** The load under way or done, if any (for a close that must not start one). */
  readonly current: Promise<T> | undefined;
}

export function loadOnce<T>(load: () => Promise<T>): LoadOnce<T> {
  let current: Promise<T> | undefined;
  return {
    get() {
      current ??= load().catch((err) => {
        current = undefined;
        throw err;
      });
      return current;
    },
    get current() {
      return current;
    },
  };
}
