/**
 * The pool store of one host service: one JSON file (`<home>/.pools/pools.json`), rewritten
 * atomically (temporary file, flush, rename) on every change, so that a kill at any moment leaves
 * the state before the change or after it. Changes are made one at a time, in the order asked.
 */
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { writeFileAtomic } from "../../common/atomic-write.js";
import { settled } from "../../common/settled.js";
import { makeDirectory } from "../../os/make-directory.js";
import { type Edit, EditingPoolStore, poolNotFound, poolSnapshotSchema } from "./pool-edits.js";
import type { PoolSnapshot } from "./pool-store.js";

export class FilePoolStore extends EditingPoolStore {
  private state: PoolSnapshot | undefined;
  private queue: Promise<void> = Promise.resolve();

  constructor(readonly file: string) {
    super();
  }

  async load(): Promise<PoolSnapshot> {
    const state = await this.current();
    return structuredClone(state);
  }

  async close() {
    await this.queue;
  }

  /**
   * Applies `edit` to a copy of the state and writes it; the copy becomes the state only once
   * written, so a failed edit or write changes nothing.
   */
  protected change<T>(edit: Edit<T>): Promise<T> {
    const next = this.queue.then(async () => {
      const copy = structuredClone(await this.current());
      const result = edit(copy);
      await makeDirectory(dirname(this.file));
      await writeFileAtomic(this.file, `${JSON.stringify(copy, null, 1)}\n`, { mode: 0o600 });
      this.state = copy;
      return result;
    });
    this.queue = settled(next);
    return next;
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
