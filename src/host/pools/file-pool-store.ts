/**
 * The pool store of one host service: one JSON file (`<home>/.pools/pools.json`), rewritten
 * atomically (temporary file, flush, rename) on every change, so that a kill at any moment leaves
 * the state before the change or after it. Changes are made one at a time, in the order asked.
 */
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { z } from "zod";
import { writeFileAtomic } from "../../common/atomic-write.js";
import { settled } from "../../common/settled.js";
import { makeDirectory } from "../../os/make-directory.js";
import { HostError } from "../errors.js";
import { RUNTIME_KINDS } from "../runtimes/kinds.js";
import type { PoolSnapshot, PoolStore } from "./pool-store.js";
import type { PoolDefinition, PoolMember } from "./pool-types.js";

const claimSchema = z.object({ by: z.string().nullable(), at: z.string(), expiresAt: z.string().nullable() });
const fileSchema = z.object({
  pools: z.array(
    z.object({
      name: z.string(),
      runtime: z.enum(RUNTIME_KINDS),
      template: z.discriminatedUnion("kind", [
        z.object({ kind: z.literal("desktop"), name: z.string() }),
        z.object({ kind: z.literal("image"), image: z.string() }),
      ]),
      spec: z.object({ cpu: z.number(), memory: z.string(), diskSize: z.string(), display: z.string() }),
      size: z.number(),
      ttlSeconds: z.number().nullable(),
      createdAt: z.string(),
    }),
  ),
  members: z.array(
    z.object({
      name: z.string(),
      pool: z.string(),
      state: z.enum(["starting", "ready", "claimed"]),
      createdAt: z.string(),
      readyAt: z.string().nullable(),
      claim: claimSchema.nullable(),
    }),
  ),
});

export class FilePoolStore implements PoolStore {
  private state: PoolSnapshot | undefined;
  private queue: Promise<void> = Promise.resolve();

  constructor(readonly file: string) {}

  async load(): Promise<PoolSnapshot> {
    const state = await this.current();
    return structuredClone(state);
  }

  createPool(pool: PoolDefinition) {
    return this.change((state) => {
      if (state.pools.some((p) => p.name === pool.name)) {
        throw new HostError("failed", `Pool already exists with name: ${pool.name}`);
      }
      state.pools.push(structuredClone(pool));
    });
  }

  updatePool(name: string, change: (pool: PoolDefinition) => PoolDefinition) {
    return this.change((state) => {
      const index = state.pools.findIndex((p) => p.name === name);
      if (index < 0) throw poolNotFound(name);
      state.pools[index] = structuredClone(change(structuredClone(state.pools[index])));
      return structuredClone(state.pools[index]);
    });
  }

  removePool(name: string) {
    return this.change((state) => {
      state.pools = state.pools.filter((p) => p.name !== name);
      state.members = state.members.filter((m) => m.pool !== name);
    });
  }

  addMember(member: PoolMember) {
    return this.change((state) => {
      if (!state.pools.some((p) => p.name === member.pool)) throw poolNotFound(member.pool);
      if (state.members.some((m) => m.name === member.name)) {
        throw new HostError("failed", `A pool desktop named ${member.name} exists already`);
      }
      state.members.push(structuredClone(member));
    });
  }

  updateMember(name: string, change: (member: PoolMember) => PoolMember) {
    return this.change((state) => {
      const index = state.members.findIndex((m) => m.name === name);
      if (index < 0) throw new HostError("not_found", `Not a desktop of any pool: ${name}`);
      state.members[index] = structuredClone(change(structuredClone(state.members[index])));
      return structuredClone(state.members[index]);
    });
  }

  removeMember(name: string) {
    return this.change((state) => {
      state.members = state.members.filter((m) => m.name !== name);
    });
  }

  async close() {
    await this.queue;
  }

  /**
   * Applies `edit` to a copy of the state and writes it; the copy becomes the state only once
   * written, so a failed edit or write changes nothing.
   */
  private change<T>(edit: (state: PoolSnapshot) => T): Promise<T> {
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
    const checked = fileSchema.safeParse(parsed);
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

export function poolNotFound(name: string) {
  return new HostError("not_found", `Pool not found: ${name}`);
}
