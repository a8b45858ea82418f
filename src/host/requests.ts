/**
 * The bodies the /svc routes accept, as zod schemas: the routes check requests against them, and
 * the services take the types derived from them (one definition, never written twice).
 */
import { z } from "zod";
import { networkFieldSchema, networkPolicySchema } from "./egress/policy.js";
import { RUNTIME_KINDS } from "./runtimes/kinds.js";

/** Which runtime backs a desktop: `qemu`, `container` or `kubernetes`. */
export const runtimeSchema = z.enum(RUNTIME_KINDS, {
  error: (issue) => `Unknown runtime '${String(issue.input)}' (expected ${RUNTIME_KINDS.join(", ")})`,
});

export const createSchema = z.object({
  name: z.string(),
  os: z.string(),
  cpu: z.number().int(),
  memory: z.string(),
  diskSize: z.string(),
  display: z.string(),
  ipsw: z.string().optional(),
  storage: z.string().optional(),
  /** lume's network mode (`nat`), or a network policy (docs/egress.md). */
  network: networkFieldSchema,
  runtime: runtimeSchema.optional(),
  /** The image a container desktop runs (default: the service's desktop image); not for QEMU. */
  image: z.string().optional(),
});

export const cloneSchema = z.object({
  name: z.string(),
  newName: z.string(),
  sourceLocation: z.string().optional(),
  destLocation: z.string().optional(),
});

export const updateSchema = z.object({
  cpu: z.number().int().optional(),
  memory: z.string().optional(),
  diskSize: z.string().optional(),
  display: z.string().optional(),
  storage: z.string().optional(),
});

export const runSchema = z.object({
  noDisplay: z.boolean().optional(),
  sharedDirectories: z
    .array(z.object({ hostPath: z.string().min(1), readOnly: z.boolean().optional() }))
    .max(16)
    .optional(),
  recoveryMode: z.boolean().optional(),
  storage: z.string().optional(),
  network: z.string().optional(),
  vnc: z
    .string()
    .refine((v) => v === "enabled" || v === "disabled", {
      error: (issue) => `Invalid vnc policy '${issue.input}'. Expected 'enabled' or 'disabled'.`,
    })
    .optional(),
});

export const snapshotSchema = z.object({ name: z.string() });
export const restoreSchema = z.object({ snapshot: z.string() });

/** The most forks one request makes. */
export const MAX_FORKS = 32;
export const forkSchema = z
  .object({
    snapshot: z.string(),
    names: z.array(z.string()).min(1, { error: "names: give at least one name" }).max(MAX_FORKS).optional(),
    count: z
      .number()
      .int()
      .min(1, { error: "count: at least 1" })
      .max(MAX_FORKS, { error: `count: at most ${MAX_FORKS} forks at once` })
      .optional(),
    /** With `count`: the forks are `<prefix>-1` … `<prefix>-<count>` (default: `<vm>-fork`). */
    prefix: z.string().optional(),
  })
  .refine((f) => (f.names === undefined) !== (f.count === undefined), {
    error: "Give either names or count (with an optional prefix), not both",
  });
export type ForkRequest = z.infer<typeof forkSchema>;

export const stopSchema = z.object({
  storage: z.string().optional(),
  force: z.boolean().optional(),
  graceSeconds: z.number().min(0).max(600).optional(),
});

export const pullSchema = z.object({
  image: z.string(),
  /** `container` (or another runtime made from images) pulls a container image into its engine. */
  runtime: runtimeSchema.optional(),
  name: z.string().optional(),
  registry: z.string().optional(),
  organization: z.string().optional(),
  storage: z.string().optional(),
});

export const pushSchema = z.object({
  name: z.string(),
  imageName: z.string(),
  tags: z.array(z.string()).max(64),
  registry: z.string().optional(),
  organization: z.string().optional(),
  storage: z.string().optional(),
  chunkSizeMb: z.number().int().min(1).max(16384).optional(),
  singleLayer: z.boolean().optional(),
});

export const configSchema = z.object({
  homeDirectory: z.string().optional(),
  cacheDirectory: z.string().optional(),
  cachingEnabled: z.boolean().optional(),
  ipswCatalogUrl: z.url({ protocol: /^https?$/ }).optional(),
});

/** A pool holds at least one desktop and at most this many (a 2-core host runs about 24). */
export const MAX_POOL_SIZE = 256;
/** The longest a claim may last before it is released for its claimant: a week. */
export const MAX_TTL_SECONDS = 7 * 24 * 3600;
/** The longest a claim waits for a desktop of an empty pool. */
export const MAX_CLAIM_WAIT_SECONDS = 900;

const poolSize = z
  .number()
  .int({ error: "expected a whole number of desktops" })
  .min(1, { error: `a pool holds from 1 to ${MAX_POOL_SIZE} desktops` })
  .max(MAX_POOL_SIZE, { error: `a pool holds from 1 to ${MAX_POOL_SIZE} desktops` });
const ttl = z
  .number()
  .int({ error: "expected a whole number of seconds" })
  .min(1, { error: `expected 1 to ${MAX_TTL_SECONDS} seconds` })
  .max(MAX_TTL_SECONDS, { error: `expected 1 to ${MAX_TTL_SECONDS} seconds` });

export const poolCreateSchema = z.object({
  name: z.string(),
  /** A stopped desktop to clone, or an image reference (default: the service's desktop image). */
  template: z.string().optional(),
  size: poolSize,
  runtime: runtimeSchema.optional(),
  /** How long a claim lasts unless released (seconds); none: until released. */
  ttl: ttl.optional(),
  cpu: z.number().int().min(1).max(1024).optional(),
  memory: z.string().optional(),
  diskSize: z.string().optional(),
  display: z.string().optional(),
  /** The network policy of each desktop made from an image (docs/egress.md); a clone keeps its template's. */
  network: networkPolicySchema.optional(),
});

export const poolUpdateSchema = z.object({ size: poolSize.optional(), ttl: ttl.optional() });

export const claimSchema = z.object({
  /** Wait for a desktop when none is ready (default true); false answers 503 at once. */
  wait: z.boolean().optional(),
  /** How long to wait, in seconds (default 60). */
  timeout: z
    .number()
    .min(0)
    .max(MAX_CLAIM_WAIT_SECONDS, { error: `at most ${MAX_CLAIM_WAIT_SECONDS} seconds` })
    .optional(),
  /** This claim's own time to live (seconds), instead of the pool's. */
  ttl: ttl.optional(),
  /** Who claims, for people reading the pool (free text). */
  owner: z.string().max(200).optional(),
});

export const locationSchema = z.object({ name: z.string(), path: z.string() });

export type CreateRequest = z.infer<typeof createSchema>;
export type CloneRequest = z.infer<typeof cloneSchema>;
export type UpdateRequest = z.infer<typeof updateSchema>;
export type RunRequest = z.infer<typeof runSchema>;
export type StopRequest = z.infer<typeof stopSchema>;
export type PullRequest = z.infer<typeof pullSchema>;
export type PushRequest = z.infer<typeof pushSchema>;
export type ConfigChange = z.infer<typeof configSchema>;
export type PoolCreateRequest = z.infer<typeof poolCreateSchema>;
export type PoolUpdateRequest = z.infer<typeof poolUpdateSchema>;
export type ClaimRequest = z.infer<typeof claimSchema>;
