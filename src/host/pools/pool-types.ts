/**
 * What a warm pool is made of, as its store keeps it: the pool's definition (what its desktops are
 * made from, how many are kept ready, how long a claim lasts) and its members (each desktop the
 * pool made, its state, and who claimed it until when). Readiness, addresses and keys are the
 * desktop's own record's business (the VM service), never kept here.
 */

import type { RuntimeKind } from "../desktops/kinds.js";
import type { NetworkPolicy } from "../egress/policy.js";

/**
 * What each desktop of a pool is made from: a stopped desktop cloned, an image, or a running
 * desktop's memory snapshot forked (QEMU: each member resumes from it instead of booting).
 */
export type PoolTemplate =
  | { kind: "desktop"; name: string }
  | { kind: "image"; image: string }
  | { kind: "snapshot"; name: string; snapshot: string };

/** What happens to a claimed desktop whose lease ran out: removed, or put to sleep (still claimed). */
export const ON_EXPIRE = ["release", "hibernate"] as const;
export type OnExpire = (typeof ON_EXPIRE)[number];

/** The sizes a desktop made from an image gets (a clone keeps its template's). */
export interface PoolSpec {
  cpu: number;
  memory: string;
  diskSize: string;
  display: string;
  /** Each desktop's network policy (docs/egress.md); none: the open network. */
  network?: NetworkPolicy;
}

export interface PoolDefinition {
  name: string;
  runtime: RuntimeKind;
  template: PoolTemplate;
  spec: PoolSpec;
  /**
   * How the pool follows demand (pool-sizing.ts), counting unclaimed desktops: `target` are kept
   * awake and ready; at least `min` are kept, those beyond `target` asleep where the runtime can
   * hibernate; at most `max` exist at once (claims that find none ready start one up to it). A
   * pool made with `size` has all three equal to it.
   */
  min: number;
  max: number;
  target: number;
  /** Seconds a claim lasts before it ends by itself (`onExpire`); null: until released. */
  ttlSeconds: number | null;
  onExpire: OnExpire;
  /** Seconds an unclaimed desktop beyond `target` stays awake before it sleeps or goes; null: at once. */
  idleTimeoutSeconds: number | null;
  createdAt: string;
}

/**
 * A desktop of a pool: `starting` (made and started, not yet answering), `ready` (its computer
 * server answered: it can be handed out), `hibernated` (unclaimed and asleep: a claim wakes it),
 * `claimed` (handed out until released or expired; it may sleep meanwhile).
 */
export type MemberState = "starting" | "ready" | "hibernated" | "claimed";

export interface ClaimInfo {
  /** Who claimed it, as the claimant said (free text, for people), or null. */
  by: string | null;
  at: string;
  /** When the claim ends by itself (ISO 8601), or null (no ttl, or asleep: the lease waits). */
  expiresAt: string | null;
  /** The claim's ttl, which a keepalive renews it by (seconds), or null. */
  ttlSeconds?: number | null;
  /** While the claimed desktop sleeps: since when, and what was left of its lease (ms). */
  pausedAt?: string | null;
  remainingMs?: number | null;
}

export interface PoolMember {
  /** The desktop's name (the VM service's), unique across pools. */
  name: string;
  pool: string;
  state: MemberState;
  createdAt: string;
  readyAt: string | null;
  claim: ClaimInfo | null;
}
