/**
 * Reading request bodies for the /svc routes: JSON, checked against a zod schema. A failure is a
 * 400 whose message starts with lume's `Invalid request body` (clients match on it) and names the
 * field. `null` on an optional field means the same as leaving it out, as in lume.
 */
import type { Context } from "hono";
import { z } from "zod";
import { issueSentences } from "../../common/zod-messages.js";
import { HostError } from "../errors.js";

export async function jsonBody<T extends z.ZodType>(
  c: Context,
  schema: T,
  options: { required?: boolean; label?: string } = {},
): Promise<z.infer<T>> {
  const label = options.label ?? "Invalid request body";
  const text = await c.req.text();
  let value: unknown = {};
  if (text.trim() !== "") {
    try {
      value = JSON.parse(text);
    } catch {
      throw new HostError("invalid_params", `${label}: it is not valid JSON`);
    }
  } else if (options.required) {
    throw new HostError("invalid_params", `${label}: a JSON object is required`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new HostError("invalid_params", `${label}: expected a JSON object`);
  }
  const withoutNulls = Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null));
  const parsed = schema.safeParse(withoutNulls);
  if (!parsed.success) {
    throw new HostError("invalid_params", `${label}: ${describeIssues(parsed.error, withoutNulls)}`);
  }
  return parsed.data;
}

/** One sentence per problem, naming the field: `cpu is required`, `cpu: Invalid input: expected int…`. */
export function describeIssues(error: z.ZodError, input: unknown): string {
  return issueSentences(error, { whole: "body", input }).join("; ");
}

/** A query parameter checked by a schema; its failure names the parameter. */
export function queryParam<T extends z.ZodType>(c: Context, name: string, schema: T): z.infer<T> {
  const parsed = schema.safeParse(c.req.query(name));
  if (!parsed.success) {
    throw new HostError(
      "invalid_params",
      `Invalid query parameter ${name}: ${parsed.error.issues[0]?.message}`,
    );
  }
  return parsed.data;
}

const waitSchema = z.enum(["ready"], { error: "expected ready" }).optional();
const secondsSchema = z
  .string()
  .regex(/^\d+(\.\d+)?$/, { error: "expected a number of seconds" })
  .transform(Number)
  .optional();
/** How long `?wait=ready` waits when no `timeout` is given. */
const DEFAULT_WAIT_SECONDS = 120;

/**
 * `?wait=ready&timeout=S` (get, restore, fork): the milliseconds to wait for the desktop to be
 * ready, or undefined when the request does not ask to wait.
 */
export function readyWaitMs(c: Context): number | undefined {
  if (queryParam(c, "wait", waitSchema) !== "ready") return undefined;
  return (queryParam(c, "timeout", secondsSchema) ?? DEFAULT_WAIT_SECONDS) * 1000;
}

/** `storage` from the body or, failing that, the query string. */
export function storageOf(c: Context, body?: { storage?: string }): string | undefined {
  return body?.storage ?? c.req.query("storage") ?? undefined;
}
