/**
 * Runs tasks one at a time per key (a VM directory); tasks of different keys run side by side.
 * A task that needs several keys takes them all at once, in one global order, so two tasks that
 * need the same keys can never each hold one and wait for the other; a key given twice is taken once.
 */
import { settled } from "../common/settled.js";

export class KeyedLock {
  /** Per key, when the last task given it is over (settled: never rejects). */
  private tails = new Map<string, Promise<void>>();

  run<T>(keys: string | string[], task: () => Promise<T>): Promise<T> {
    const wanted = [...new Set(typeof keys === "string" ? [keys] : keys)].sort();
    const previous = Promise.all(wanted.map((key) => this.tails.get(key)));
    const result = previous.then(task);
    const tail = settled(result);
    for (const key of wanted) {
      this.tails.set(key, tail);
      void tail.then(() => {
        if (this.tails.get(key) === tail) this.tails.delete(key);
      });
    }
    return result;
  }
}
