/**
 * The bodies the /svc routes accept, as zod schemas: the routes check requests against them, and
 * the services take the types derived from them (one definition, never written twice).
 */
import { z } from "zod";
import { HIBERNATION_MODES, type HibernationMode } from "./desktops/hibernation.js";
import { RUNTIME_KINDS } from "./desktops/kinds.js";
import { networkFieldSchema, networkPolicySchema } from "./egress/policy.js";
import { ON_EXPIRE } from "./pools/pool-types.js";

/** Which runtime backs a desktop: `qemu`, `container` or `kubernetes`. */
export const runtimeSchema = z.enum(RUNTIME_KINDS, {
  error: (issue) => `Unknown runtime '${String(issue.input)}' (expected ${RUNTIME_KINDS.join(", ")})`,
});

/** The longest idle time: a day. */
export const MAX_IDLE_SECONDS = 24 * 3600;
const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600 };
/** A time of idleness: `300s`, `5m`, `1h`, or a whole number of seconds; from 1 s to a day. */
export const idleTimeoutSchema = z
  .union([z.number(), z.string()], { error: "expected a duration such as 300s, 5m or 1h" })
  .transform((value, ctx) => {
    const match = typeof value === "string" ? /^(\d+)([smh])$/.exec(value.trim()) : null;
    const seconds =
      typeof value === "number"
        ? value
        : match
          ? Number(match[1]) * (DURATION_UNITS[match[2]] ?? 1)
          : Number.NaN;
    if (typeof value === "string" && !match) {
      ctx.addIssue({ code: "custom", message: `'${value}' is not a duration: expected e.g. 300s, 5m or 1h` });
      return z.NEVER;
    }
    if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_IDLE_SECONDS) {
      ctx.addIssue({
        code: "custom",
        message: `expected 1 second to ${MAX_IDLE_SECONDS / 3600} hours, not ${JSON.stringify(value)}`,
      });
      return z.NEVER;
    }
    return seconds;
  });
/** A desktop's idle timeout as PATCH takes it: a duration, or `"off"` (null means left out, as in lume). */
const idleTimeoutSetting = z.unknown().transform((value, ctx) => {
  if (value === "off") return null;
  const parsed = idleTimeoutSchema.safeParse(value);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues) ctx.addIssue({ code: "custom", message: issue.message });
  return z.NEVER;
});

/** A hibernation mode (desktops/hibernation.ts), named in the message when unknown. */
const hibernationModeSchema = z.enum(HIBERNATION_MODES, {
  error: (issue) =>
    `Unknown hibernation mode '${String(issue.input)}' (expected ${HIBERNATION_MODES.join(", ")})`,
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
  /** Hibernate it once idle this long (`300s`, `5m`; sleep/idle-watcher.ts); off when left out. */
  idleTimeout: idleTimeoutSchema.optional(),
  /** What it keeps when it is hibernated for being idle (default: its runtime's default mode). */
  idleMode: hibernationModeSchema.optional(),
});

export const cloneSchema = z.object({
  name: z.string(),
  newName: z.string(),
  sourceLocation: z.string().optional(),
  destLocation: z.string().optional(),
});

export const updateSchema = z.object({
  /** The idle timeout (`300s`), or `"off"` to turn auto-pause off. */
  idleTimeout: idleTimeoutSetting.optional(),
  /** What it keeps when hibernated for being idle; `"default"` for its runtime's default. */
  idleMode: z
    .unknown()
    .transform((value, ctx) => {
      if (value === "default") return null;
      if (HIBERNATION_MODES.includes(value as HibernationMode)) return value as HibernationMode;
      ctx.addIssue({
        code: "custom",
        message: `Unknown hibernation mode '${String(value)}' (expected ${[...HIBERNATION_MODES, "default"].join(", ")})`,
      });
      return z.NEVER;
    })
    .optional(),
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
/** What a hibernating desktop keeps (desktops/hibernation.ts); its runtime's default when left out. */
export const hibernateSchema = z.object({ mode: hibernationModeSchema.optional() });
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
/** `min` and `target` may be 0 (a pool that starts desktops only when claimed). */
const poolCount = z
  .number()
  .int({ error: "expected a whole number of desktops" })
  .min(0, { error: `expected 0 to ${MAX_POOL_SIZE} desktops` })
  .max(MAX_POOL_SIZE, { error: `expected 0 to ${MAX_POOL_SIZE} desktops` });
const onExpire = z.enum(ON_EXPIRE, {
  error: (issue) => `Unknown onExpire '${String(issue.input)}' (expected ${ON_EXPIRE.join(" or ")})`,
});

/**
 * How a pool is sized: `size` (min = max = target = size, as before), or `max` with `min` and
 * `target` (both 0 when left out); min and target may not pass max.
 */
function sizing<T extends { size?: number; min?: number; max?: number; target?: number }>(
  pool: T,
  ctx: z.RefinementCtx,
  required: boolean,
) {
  const parts = [pool.min, pool.max, pool.target].filter((v) => v !== undefined).length;
  if (pool.size !== undefined && parts > 0) {
    ctx.addIssue({
      code: "custom",
      message: "give either size, or min, max and target, not both",
      path: ["size"],
    });
  } else if (required && pool.size === undefined && pool.max === undefined) {
    ctx.addIssue({
      code: "custom",
      message: "size is required (or max, with min and target)",
      path: ["size"],
    });
  }
  for (const key of ["min", "target"] as const) {
    const value = pool[key];
    if (value !== undefined && pool.max !== undefined && value > pool.max) {
      ctx.addIssue({ code: "custom", message: `${value} is more than max (${pool.max})`, path: [key] });
    }
  }
}
const ttl = z
  .number()
  .int({ error: "expected a whole number of seconds" })
  .min(1, { error: `expected 1 to ${MAX_TTL_SECONDS} seconds` })
  .max(MAX_TTL_SECONDS, { error: `expected 1 to ${MAX_TTL_SECONDS} seconds` });

export const poolCreateSchema = z
  .object({
    name: z.string(),
    /** A stopped desktop to clone, or an image reference (default: the service's desktop image). */
    template: z.string().optional(),
    /** A memory snapshot of `template` (a QEMU VM): members are forks of it, not boots. */
    fromSnapshot: z.string().optional(),
    size: poolSize.optional(),
    min: poolCount.optional(),
    max: poolSize.optional(),
    target: poolCount.optional(),
    runtime: runtimeSchema.optional(),
    /** How long a claim lasts unless released or kept alive (seconds); none: until released. */
    ttl: ttl.optional(),
    /** What a claim whose ttl ran out becomes: released (the default) or hibernated. */
    onExpire: onExpire.optional(),
    /** How long a desktop beyond the target stays awake, unclaimed, before it sleeps or goes. */
    idleTimeout: idleTimeoutSchema.optional(),
    cpu: z.number().int().min(1).max(1024).optional(),
    memory: z.string().optional(),
    diskSize: z.string().optional(),
    display: z.string().optional(),
    /** The network policy of each desktop made from an image (docs/egress.md); a clone keeps its template's. */
    network: networkPolicySchema.optional(),
  })
  .superRefine((pool, ctx) => sizing(pool, ctx, true));

export const poolUpdateSchema = z
  .object({
    size: poolSize.optional(),
    min: poolCount.optional(),
    max: poolSize.optional(),
    target: poolCount.optional(),
    ttl: ttl.optional(),
    onExpire: onExpire.optional(),
    idleTimeout: idleTimeoutSchema.optional(),
  })
  .superRefine((pool, ctx) => sizing(pool, ctx, false));

/** A claim's lease renewed: by `ttl` seconds from now (default: the claim's own ttl). */
export const keepaliveSchema = z.object({ ttl: ttl.optional() });

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
export type KeepaliveRequest = z.infer<typeof keepaliveSchema>;
