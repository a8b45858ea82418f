/**
 * Where a pool manager keeps what must outlive it: the pool definitions and each member's state
 * (which desktop is claimed by whom until when). The manager holds its working copy in memory and
 * writes every change here before it answers, so that a host service killed at any moment finds
 * its pools again (pool-manager.ts reconciles them with the desktops that exist).
 *
 * Two kinds of store fit: a file for one host service (file-pool-store.ts), and a cluster's
 * objects for several (claims as annotations, changed with optimistic concurrency). Changes are
 * therefore made by functions that see the current value and return the new one: a store that
 * can lose a race (a compare-and-set that fails) reads again and calls the function again; a
 * function that throws abandons the change (a claim of a desktop someone else claimed first).
 */
import type { PoolDefinition, PoolMember } from "./pool-types.js";

export interface PoolSnapshot {
  pools: PoolDefinition[];
  members: PoolMember[];
}

export interface PoolStore {
  /** Everything kept, as it is now (at start-up, and whenever the manager reconciles). */
  load(): Promise<PoolSnapshot>;
  /** Adds a pool; a clear `HostError` when one of that name exists. */
  createPool(pool: PoolDefinition): Promise<void>;
  /** Changes a pool by `change` (called again after a lost race); not found → `HostError`. */
  updatePool(name: string, change: (pool: PoolDefinition) => PoolDefinition): Promise<PoolDefinition>;
  /** Removes a pool and every member record of it (their desktops are the manager's to remove). */
  removePool(name: string): Promise<void>;
  /** Adds a member (before its desktop is made: a crash leaves a record to clean up, never an orphan). */
  addMember(member: PoolMember): Promise<void>;
  /**
   * Changes a member by `change`, which sees the stored member (called again after a lost race)
   * and may throw to abandon the change; resolves to the stored result. Not found → `HostError`.
   */
  updateMember(name: string, change: (member: PoolMember) => PoolMember): Promise<PoolMember>;
  /** Forgets a member; nothing when it is already gone. */
  removeMember(name: string): Promise<void>;
  /** Lets go of files, connections and watches. */
  close(): Promise<void>;
}
