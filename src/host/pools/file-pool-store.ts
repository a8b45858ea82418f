/**
 * The pool store of one host service: one JSON file (`<home>/.pools/pools.json`), rewritten
 * atomically (temporary file, flush, rename) on every change, so that a kill at any moment leaves
 * the state before the change or after it. Changes are made in the order asked; those asked while
 * a write is under way go to the disk together in the next one (a claim waits for at most the write
 * under way and its own, not for every refill's write queued before it).
 */
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { writeFileAtomic } from "../../common/atomic-write.js";
import { makeDirectory } from "../../os/make-directory.js";
import { type Edit, EditingPoolStore, poolNotFound, poolSnapshotSchema } from "./pool-edits.js";
import type { PoolSnapshot } from "./pool-store.js";

interface Pending {
  edit: Edit<unknown>;
  resolve(result: unknown): void;
  reject(err: unknown): void;
}

export class FilePoolStore extends EditingPoolStore {
  private state: PoolSnapshot | undefined;
  /** Changes asked and not yet written, and the writing of them while it goes on. */
  private pending: Pending[] = [];
  private writing: Promise<void> | null = null;

  constructor(readonly file: string) {
    super();
  }

  async load(): Promise<PoolSnapshot> {
    const state = await this.current();
    return structuredClone(state);
  }

  async close() {
    await this.writing;
  }

  /**
   * Applies `edit` to a copy of the state and writes it; the copy becomes the state only once
   * written, so a failed edit or write changes nothing.
   */
  protected change<T>(edit: Edit<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ edit, resolve: resolve as (result: unknown) => void, reject });
      this.writing ??= this.writeAll();
    });
  }

  /**
   * Writes the changes asked, those asked meanwhile together, until none is left. It says it is
   * done in the same turn as it finds none: a change asked later (even by code resuming as the
   * last write settles) starts the next writer rather than waiting behind one that has ended.
   */
  private async writeAll() {
    try {
      while (this.pending.length > 0) await this.write(this.pending.splice(0));
    } finally {
      this.writing = null;
    }
  }

  /** Each edit applied to a copy after the ones before it (one that throws is left out), then one write. */
  private async write(batch: Pending[]) {
    let next: PoolSnapshot;
    try {
      next = await this.current();
    } catch (err) {
      for (const item of batch) item.reject(err);
      return;
    }
    const applied: { item: Pending; result: unknown }[] = [];
    for (const item of batch) {
      const copy = structuredClone(next);
      try {
        applied.push({ item, result: item.edit(copy) });
        next = copy;
      } catch (err) {
        item.reject(err);
      }
    }
    if (applied.length === 0) return;
    try {
      await makeDirectory(dirname(this.file));
      await writeFileAtomic(this.file, `${JSON.stringify(next, null, 1)}\n`, { mode: 0o600 });
    } catch (err) {
      for (const { item } of applied) item.reject(err);
      return;
    }
    this.state = next;
    for (const { item, result } of applied) item.resolve(result);
  }

  private async current(): Promise<PoolSnapshot> {
    if (this.state) return this.state;
    const text = await readFile(this.file, "utf8").catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return undefined;
      throw err;
    });
    if (text === undefined) {
      this.state = { pools: [], members: [] };
      return this.state;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new Error(`The pool state file ${this.file} is not valid JSON: fix or remove it`);
    }
    const checked = poolSnapshotSchema.safeParse(parsed);
    if (!checked.success) {
      throw new Error(
        `The pool state file ${this.file} is not as expected (${checked.error.issues[0]?.path.join(".")}: ` +
          `${checked.error.issues[0]?.message}): fix or remove it`,
      );
    }
    this.state = checked.data;
    return this.state;
  }
}

export { poolNotFound };
