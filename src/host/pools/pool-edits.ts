/**
 * The changes a pool store makes, as functions of the stored state (pools and members) that edit
 * it in place and may throw to refuse (a pool that exists, a member claimed by someone else):
 * the same for every store, so a file and a cluster's object keep pools alike. A store applies an
 * edit to a copy and keeps the copy only once written (and, where it can lose a race, applies it
 * again to what won).
 */
import { z } from "zod";
import { RUNTIME_KINDS } from "../desktops/kinds.js";
import { HostError } from "../errors.js";
import type { PoolSnapshot, PoolStore } from "./pool-store.js";
import { ON_EXPIRE, type PoolDefinition, type PoolMember } from "./pool-types.js";

export type Edit<T> = (state: PoolSnapshot) => T;

const claimSchema = z.object({
  by: z.string().nullable(),
  at: z.string(),
  expiresAt: z.string().nullable(),
  ttlSeconds: z.number().nullable().optional(),
  pausedAt: z.string().nullable().optional(),
  remainingMs: z.number().nullable().optional(),
});
/**
 * The pools and their members as a store keeps them (a file, a ConfigMap's data). A pool kept by
 * an older service has one `size`: it reads as min = max = target = size, ttl expiry releasing.
 */
export const poolSnapshotSchema = z.object({
  pools: z.array(
    z
      .object({
        name: z.string(),
        runtime: z.enum(RUNTIME_KINDS),
        template: z.discriminatedUnion("kind", [
          z.object({ kind: z.literal("desktop"), name: z.string() }),
          z.object({ kind: z.literal("image"), image: z.string() }),
          z.object({ kind: z.literal("snapshot"), name: z.string(), snapshot: z.string() }),
        ]),
        spec: z.object({ cpu: z.number(), memory: z.string(), diskSize: z.string(), display: z.string() }),
        size: z.number().optional(),
        min: z.number().optional(),
        max: z.number().optional(),
        target: z.number().optional(),
        ttlSeconds: z.number().nullable(),
        onExpire: z.enum(ON_EXPIRE).optional(),
        idleTimeoutSeconds: z.number().nullable().optional(),
        createdAt: z.string(),
      })
      .transform(
        ({ size, min, max, target, onExpire, idleTimeoutSeconds, ...rest }): PoolDefinition => ({
          ...rest,
          min: min ?? size ?? 0,
          max: max ?? size ?? 1,
          target: target ?? size ?? 0,
          onExpire: onExpire ?? "release",
          idleTimeoutSeconds: idleTimeoutSeconds ?? null,
        }),
      ),
  ),
  members: z.array(
    z.object({
      name: z.string(),
      pool: z.string(),
      state: z.enum(["starting", "ready", "hibernated", "claimed"]),
      createdAt: z.string(),
      readyAt: z.string().nullable(),
      claim: claimSchema.nullable(),
    }),
  ),
});

export function createPool(pool: PoolDefinition): Edit<void> {
  return (state) => {
    if (state.pools.some((p) => p.name === pool.name)) {
      throw new HostError("failed", `Pool already exists with name: ${pool.name}`);
    }
    state.pools.push(structuredClone(pool));
  };
}

export function updatePool(
  name: string,
  change: (pool: PoolDefinition) => PoolDefinition,
): Edit<PoolDefinition> {
  return (state) => {
    const index = state.pools.findIndex((p) => p.name === name);
    if (index < 0) throw poolNotFound(name);
    state.pools[index] = structuredClone(change(structuredClone(state.pools[index])));
    return structuredClone(state.pools[index]);
  };
}

export function removePool(name: string): Edit<void> {
  return (state) => {
    state.pools = state.pools.filter((p) => p.name !== name);
    state.members = state.members.filter((m) => m.pool !== name);
  };
}

export function addMember(member: PoolMember): Edit<void> {
  return (state) => {
    if (!state.pools.some((p) => p.name === member.pool)) throw poolNotFound(member.pool);
    if (state.members.some((m) => m.name === member.name)) {
      throw new HostError("failed", `A pool desktop named ${member.name} exists already`);
    }
    state.members.push(structuredClone(member));
  };
}

export function updateMember(name: string, change: (member: PoolMember) => PoolMember): Edit<PoolMember> {
  return (state) => {
    const index = state.members.findIndex((m) => m.name === name);
    if (index < 0) throw new HostError("not_found", `Not a desktop of any pool: ${name}`);
    state.members[index] = structuredClone(change(structuredClone(state.members[index])));
    return structuredClone(state.members[index]);
  };
}

export function removeMember(name: string): Edit<void> {
  return (state) => {
    state.members = state.members.filter((m) => m.name !== name);
  };
}

export function poolNotFound(name: string) {
  return new HostError("not_found", `Pool not found: ${name}`);
}

/** A store that makes every change by applying one of these edits (`change`): the file's, the ConfigMap's. */
export abstract class EditingPoolStore implements PoolStore {
  abstract load(): Promise<PoolSnapshot>;
  abstract close(): Promise<void>;
  /** Applies the edit to the stored state and keeps the result; resolves to what the edit returned. */
  protected abstract change<T>(edit: Edit<T>): Promise<T>;

  createPool(pool: PoolDefinition) {
    return this.change(createPool(pool));
  }

  updatePool(name: string, change: (pool: PoolDefinition) => PoolDefinition) {
    return this.change(updatePool(name, change));
  }

  removePool(name: string) {
    return this.change(removePool(name));
  }

  addMember(member: PoolMember) {
    return this.change(addMember(member));
  }

  updateMember(name: string, change: (member: PoolMember) => PoolMember) {
    return this.change(updateMember(name, change));
  }

  removeMember(name: string) {
    return this.change(removeMember(name));
  }
}
