/**
 * What every runtime's cage does alike (container-cage.ts, qemu-cage.ts, kubernetes-cage.ts): it
 * tells the egress service that it cages desktops of its runtime, and keeps a new desktop's
 * policy, or a clone's, through it.
 */
import type { RuntimeKind } from "../desktops/kinds.js";
import type { EgressService, RuntimeCage } from "./egress-service.js";
import type { NetworkPolicy } from "./policy.js";

export abstract class Cage implements RuntimeCage {
  constructor(
    readonly kind: RuntimeKind,
    protected readonly egress: EgressService,
  ) {
    egress.addCage(this);
  }

  abstract check(policy: NetworkPolicy): void;
  abstract apply(desktop: string, policy: NetworkPolicy): Promise<void>;
  abstract proxyAddress(desktop: string): string | null;

  /** A new desktop is caged with `policy` (as it is made). */
  remember(desktop: string, policy: NetworkPolicy) {
    return this.egress.remember(desktop, this.kind, policy);
  }

  /** A clone is caged as its source is. */
  copy(source: string, target: string) {
    return this.egress.copy(source, target);
  }

  /** Whether the desktop is caged (made with a policy, known to this service). */
  caged(desktop: string): boolean {
    return this.egress.stored(desktop) !== undefined;
  }
}
