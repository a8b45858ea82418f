/**
 * What a warm pool is made of, as its store keeps it: the pool's definition (what its desktops are
 * made from, how many are kept ready, how long a claim lasts) and its members (each desktop the
 * pool made, its state, and who claimed it until when). Readiness, addresses and keys are the
 * desktop's own record's business (the VM service), never kept here.
 */
import type { NetworkPolicy } from "../egress/policy.js";
import type { RuntimeKind } from "../runtimes/kinds.js";

/** What each desktop of a pool is made from: a stopped desktop cloned, or an image. */
export type PoolTemplate = { kind: "desktop"; name: string } | { kind: "image"; image: string };

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
  /** How many desktops are kept started and not claimed. */
  size: number;
  /** Seconds a claim lasts before the desktop is released for its claimant; null: until released. */
  ttlSeconds: number | null;
  createdAt: string;
}

/**
 * A desktop of a pool: `starting` (made and started, not yet answering), `ready` (its computer
 * server answered: it can be handed out), `claimed` (handed out until released or expired).
 */
export type MemberState = "starting" | "ready" | "claimed";

export interface ClaimInfo {
  /** Who claimed it, as the claimant said (free text, for people), or null. */
  by: string | null;
  at: string;
  /** When the claim ends by itself (ISO 8601), or null. */
  expiresAt: string | null;
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
