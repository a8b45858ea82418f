/**
 * The bodies and queries of E2B's control plane (`spec/openapi.yml` of e2b-dev/infra, as the `e2b`
 * SDK sends them), as zod schemas. Fields this host cannot honour are read so that they can be
 * refused by name (sandboxes.ts), never silently dropped; fields no version of the API knows are
 * ignored, as E2B's own server does, so that a newer SDK keeps working.
 */
import { z } from "zod";
import { MAX_TTL_SECONDS } from "../requests.js";

/** The longest a sandbox may live before it is killed (or paused) unless renewed: a week. */
export const MAX_TIMEOUT_SECONDS = MAX_TTL_SECONDS;
/** What `POST /sandboxes` (v1) and `POST /v2/sandboxes` give a sandbox when `timeout` is left out. */
export const DEFAULT_TIMEOUT_SECONDS = { v1: 15, v2: 300 } as const;

const MAX_METADATA_ENTRIES = 64;
const MAX_ENV_VARS = 256;

const timeout = z
  .number()
  .int({ error: "expected a whole number of seconds" })
  .min(1, { error: `expected 1 to ${MAX_TIMEOUT_SECONDS} seconds` })
  .max(MAX_TIMEOUT_SECONDS, { error: `expected 1 to ${MAX_TIMEOUT_SECONDS} seconds (a week)` });

export const metadataSchema = z
  .record(
    z
      .string()
      .min(1, { error: "a metadata key cannot be empty" })
      .max(256, { error: "at most 256 characters" }),
    z.string().max(4096, { error: "a metadata value holds at most 4096 characters" }),
  )
  .refine((m) => Object.keys(m).length <= MAX_METADATA_ENTRIES, {
    error: `at most ${MAX_METADATA_ENTRIES} metadata entries`,
  });

export const envVarsSchema = z
  .record(
    z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, {
      error: "an environment variable's name is letters, digits and _ (not starting with a digit)",
    }),
    z.string().max(128 * 1024, { error: "a value holds at most 128 KiB" }),
  )
  .refine((m) => Object.keys(m).length <= MAX_ENV_VARS, { error: `at most ${MAX_ENV_VARS} variables` });

const networkSchema = z.object({
  allowOut: z.array(z.string()).optional(),
  denyOut: z.array(z.string()).optional(),
  allowPublicTraffic: z.boolean().optional(),
  egressProxy: z.unknown().optional(),
  maskRequestHost: z.string().max(253).optional(),
  httpsPorts: z.array(z.number().int()).optional(),
  rules: z.record(z.string(), z.unknown()).optional(),
});
export type NetworkRequest = z.infer<typeof networkSchema>;

/** `POST /sandboxes` and `POST /v2/sandboxes` (v2 is always `secure`). */
export const newSandboxSchema = z.object({
  templateID: z.string().min(1, { error: "templateID cannot be empty" }).max(256),
  timeout: timeout.optional(),
  metadata: metadataSchema.optional(),
  envVars: envVarsSchema.optional(),
  secure: z.boolean().optional(),
  autoPause: z.boolean().optional(),
  autoPauseMemory: z.boolean().optional(),
  autoResume: z.object({ enabled: z.boolean() }).optional(),
  allow_internet_access: z.boolean().optional(),
  network: networkSchema.optional(),
  mcp: z.unknown().optional(),
  iam: z.object({ tokens: z.record(z.string(), z.unknown()).optional() }).optional(),
  volumeMounts: z.array(z.object({ name: z.string(), path: z.string() })).optional(),
});
export type NewSandboxRequest = z.infer<typeof newSandboxSchema>;

/** `POST /sandboxes/{id}/timeout`. */
export const timeoutSchema = z.object({ timeout: z.number().int().min(0).max(MAX_TIMEOUT_SECONDS) });

/** `POST /sandboxes/{id}/refreshes`: keep it alive `duration` seconds more (default: its timeout again). */
export const refreshSchema = z.object({
  duration: z.number().int().min(0).max(MAX_TIMEOUT_SECONDS).optional(),
});

/** `POST /v2/sandboxes/{id}/connect` (timeout defaults to 300), `POST /sandboxes/{id}/resume`. */
export const connectSchema = z.object({ timeout: timeout.optional(), memory: z.boolean().optional() });
export const resumeSchema = z.object({
  timeout: timeout.optional(),
  autoPause: z.boolean().optional(),
  memory: z.boolean().optional(),
});

/** `PUT /sandboxes/{id}/network`: the egress as it is to be from now on (omitted fields cleared). */
export const networkUpdateSchema = z.object({
  allow_internet_access: z.boolean().optional(),
  allowOut: z.array(z.string()).max(256).optional(),
  denyOut: z.array(z.string()).max(256).optional(),
  egressProxy: z.unknown().optional(),
  rules: z.record(z.string(), z.unknown()).optional(),
});

/** `POST /sandboxes/{id}/pause`. */
export const pauseSchema = z.object({ memory: z.boolean().optional() });

export const sandboxStates = ["running", "paused"] as const;
export type SandboxState = (typeof sandboxStates)[number];
