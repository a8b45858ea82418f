/**
 * The bodies the /svc routes accept, as zod schemas: the routes check requests against them, and
 * the services take the types derived from them (one definition, never written twice).
 */
import { z } from "zod";
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
  network: z.string().optional(),
  runtime: runtimeSchema.optional(),
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

export const stopSchema = z.object({
  storage: z.string().optional(),
  force: z.boolean().optional(),
  graceSeconds: z.number().min(0).max(600).optional(),
});

export const pullSchema = z.object({
  image: z.string(),
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

export const locationSchema = z.object({ name: z.string(), path: z.string() });

export type CreateRequest = z.infer<typeof createSchema>;
export type CloneRequest = z.infer<typeof cloneSchema>;
export type UpdateRequest = z.infer<typeof updateSchema>;
export type RunRequest = z.infer<typeof runSchema>;
export type StopRequest = z.infer<typeof stopSchema>;
export type PullRequest = z.infer<typeof pullSchema>;
export type PushRequest = z.infer<typeof pushSchema>;
export type ConfigChange = z.infer<typeof configSchema>;
