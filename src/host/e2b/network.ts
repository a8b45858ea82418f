/**
 * E2B's network options as Hangar's network policies (docs/egress.md). E2B allows everything unless
 * told to deny; its allow entries win over its deny entries. A Hangar policy allows a list and
 * refuses the rest, so:
 *
 * - `denyOut` of all traffic (`0.0.0.0/0`, the SDK's `allTraffic`) or `allow_internet_access:
 *   false`, with `allowOut` → `{"egress": {"allow": allowOut}}`; without → `{"egress": "deny"}`;
 * - `allowOut` alone → nothing to restrict (everything is allowed anyway);
 * - `denyOut` of some addresses only, `egressProxy` and `rules` (headers added on the way out) have
 *   no policy of the same meaning and are refused by name, never dropped (a policy's credentials
 *   add headers from Hangar's secret store instead).
 */
import type { NetworkPolicy } from "../egress/policy.js";
import { E2bError } from "./errors.js";

/** What E2B's create and network update say of egress. */
export interface E2bEgress {
  allowOut?: string[];
  denyOut?: string[];
  egressProxy?: unknown;
  rules?: Record<string, unknown>;
}

/** The addresses that mean "all traffic" in `denyOut`. */
const ALL_TRAFFIC = new Set(["0.0.0.0/0", "::/0"]);

/** The policy a sandbox's desktop is made with, or undefined for the open network. */
export function egressPolicy(
  network: E2bEgress | undefined,
  internet: boolean | undefined,
): NetworkPolicy | undefined {
  const refuse = (what: string, why: string) => {
    throw new E2bError(400, `${what} is not supported by this Hangar host: ${why}`);
  };
  if (network?.egressProxy) {
    refuse("network.egressProxy", "egress leaves through the host's own proxy, which applies the policy");
  }
  if (network?.rules && Object.keys(network.rules).length > 0) {
    refuse(
      "network.rules",
      "headers added on the way out come from the host's secret store (a network policy's credentials, docs/egress.md)",
    );
  }
  const allow = network?.allowOut ?? [];
  const deny = network?.denyOut ?? [];
  const denyAll = internet === false || deny.some((entry) => ALL_TRAFFIC.has(entry.trim()));
  if (!denyAll && deny.length > 0) {
    refuse(
      "network.denyOut of some addresses only",
      "a policy allows a list and refuses the rest: deny all traffic (0.0.0.0/0) and list in allowOut what may be reached",
    );
  }
  if (!denyAll) return undefined;
  return allow.length === 0 ? { egress: "deny" } : { egress: { allow } };
}
