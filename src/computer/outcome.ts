/** The result of running one command, before a transport frames it. */
import type { ErrorCode } from "../common/errors.js";

export type Outcome =
  | { readonly success: true; readonly result: unknown }
  | {
      readonly success: false;
      readonly error: string;
      readonly code: ErrorCode;
      /** Extra fields the reference puts on this failure (e.g. `stdout`, `return_code`). */
      readonly fields: Readonly<Record<string, unknown>>;
    };

export function failure(code: ErrorCode, error: string, fields: Record<string, unknown> = {}): Outcome {
  return { success: false, error, code, fields };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !Buffer.isBuffer(value);
}

/**
 * The `/cmd` event: `{"success": true, "content": result, ...result}`. With `spread` off, the seed
 * shape alone (`content` only). Failures carry `error`, `code` and the reference's extra fields.
 */
export function cmdEnvelope(outcome: Outcome, spread: boolean): Record<string, unknown> {
  if (!outcome.success) return failureEnvelope(outcome);
  const { result } = outcome;
  if (!spread || !isPlainObject(result)) return { success: true, content: result ?? null };
  const { success: _s, content: _c, ...fields } = result;
  return { success: true, content: result, ...fields };
}

const SUCCESS_HEAD = Buffer.from('data: {"success":true,"content":');
const COMMA = Buffer.from(",");
const EVENT_END = Buffer.from("\n\n");

/**
 * The `/cmd` event as bytes, `data: {json}\n\n`. For an object result with the spread copy, the
 * result is serialized once and its bytes written twice (as `content` and as the fields beside it),
 * which halves the cost for large results such as screenshots and file chunks.
 */
export function cmdEventBytes(outcome: Outcome, spread: boolean): Buffer[] {
  if (outcome.success && spread && isPlainObject(outcome.result)) {
    const result = outcome.result;
    if (!("success" in result) && !("content" in result)) {
      const json = Buffer.from(JSON.stringify(result));
      if (json.length <= 2) return [SUCCESS_HEAD, json, Buffer.from("}"), EVENT_END];
      return [SUCCESS_HEAD, json, COMMA, json.subarray(1), EVENT_END];
    }
  }
  return [Buffer.from(`data: ${JSON.stringify(cmdEnvelope(outcome, spread))}\n\n`)];
}

/** The `/ws` reply: cua's shape `{"success": true, ...result}`; a non-object result becomes `content`. */
export function wsEnvelope(outcome: Outcome): Record<string, unknown> {
  if (!outcome.success) return failureEnvelope(outcome);
  const { result } = outcome;
  if (!isPlainObject(result)) return { success: true, content: result ?? null };
  const { success: _s, ...fields } = result;
  return { success: true, ...fields };
}

function failureEnvelope(outcome: Extract<Outcome, { success: false }>): Record<string, unknown> {
  return { success: false, error: outcome.error, code: outcome.code, ...outcome.fields };
}
