/** A pool as `GET /svc/pools[/:name]` shows it, from what the manager holds. */
import type { RuntimeKind } from "../desktops/kinds.js";
import type { PoolState } from "./pool-context.js";
import type { OnExpire, PoolMember, PoolSpec, PoolTemplate } from "./pool-types.js";

export interface PoolRecord {
  name: string;
  runtime: RuntimeKind;
  template: string;
  templateKind: PoolTemplate["kind"];
  /** With a snapshot template: the memory snapshot its members are forked from. */
  fromSnapshot: string | null;
  /** The target (unclaimed desktops kept awake), as pools made with one `size` call it. */
  size: number;
  min: number;
  max: number;
  target: number;
  ttl: number | null;
  onExpire: OnExpire;
  /** Seconds, or null. */
  idleTimeout: number | null;
  spec: PoolSpec;
  ready: number;
  starting: number;
  hibernated: number;
  claimed: number;
  /** Why the last start failed, while starts keep failing (they are retried with a growing delay). */
  lastError: string | null;
  createdAt: string;
  desktops: {
    name: string;
    state: PoolMember["state"];
    createdAt: string;
    readyAt: string | null;
    claimedBy: string | null;
    claimedAt: string | null;
    expiresAt: string | null;
    /** A claimed desktop asleep: its lease waits (the ms left of it). */
    leaseLeftMs: number | null;
    /** A desktop this service starts: what the start does now, and for how long (e.g. "warming up for 2 s"). */
    startStep: string | null;
  }[];
}

export function poolRecord(state: PoolState): PoolRecord {
  const { def } = state;
  const members = [...state.members.values()];
  const count = (s: PoolMember["state"]) => members.filter((m) => m.state === s).length;
  return {
    name: def.name,
    runtime: def.runtime,
    template: describeTemplate(def.template),
    templateKind: def.template.kind,
    fromSnapshot: def.template.kind === "snapshot" ? def.template.snapshot : null,
    size: def.target,
    min: def.min,
    max: def.max,
    target: def.target,
    ttl: def.ttlSeconds,
    onExpire: def.onExpire,
    idleTimeout: def.idleTimeoutSeconds,
    spec: def.spec,
    ready: count("ready"),
    starting: count("starting"),
    hibernated: count("hibernated"),
    claimed: count("claimed"),
    lastError: state.lastError,
    createdAt: def.createdAt,
    desktops: members.map((m) => ({
      name: m.name,
      state: m.state,
      createdAt: m.createdAt,
      readyAt: m.readyAt,
      claimedBy: m.claim?.by ?? null,
      claimedAt: m.claim?.at ?? null,
      expiresAt: m.claim?.expiresAt ?? null,
      leaseLeftMs: m.claim?.pausedAt ? (m.claim.remainingMs ?? null) : null,
      startStep: startStep(state, m.name),
    })),
  };
}

function startStep(state: PoolState, name: string): string | null {
  const step = state.startSteps.get(name);
  if (!step) return null;
  return `${step.step} for ${Math.round((Date.now() - step.since) / 1000)} s`;
}

export function describeTemplate(template: PoolTemplate): string {
  return template.kind === "image" ? template.image : template.name;
}
