/** The runtimes a desktop can have: `qemu` (a VM), `container` (an engine's container), `kubernetes` (a Pod). */
export const RUNTIME_KINDS = ["qemu", "container", "kubernetes"] as const;
export type RuntimeKind = (typeof RUNTIME_KINDS)[number];
