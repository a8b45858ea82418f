/** The result of running one command, before a transport frames it. */
import type { ErrorCode } from "../../common/errors.js";
import { Base64Bytes } from "./bytes.js";

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
const CLOSE = Buffer.from("}");
const QUOTE = Buffer.from('"');
const EVENT_END = Buffer.from("\n\n");

/** The number of bytes the pieces of an event take on the wire. */
export function eventLength(pieces: readonly Buffer[]): number {
  return pieces.reduce((n, piece) => n + piece.length, 0);
}

/**
 * The `/cmd` event as pieces, `data: {json}\n\n`. An object result is serialized once; with the
 * spread copy its pieces are written twice (as `content` and as the fields beside it), which halves
 * the cost for large results such as screenshots and file chunks.
 */
export function cmdEventBytes(outcome: Outcome, spread: boolean): Buffer[] {
  if (outcome.success && isPlainObject(outcome.result)) {
    const result = outcome.result;
    if (!spread) return [SUCCESS_HEAD, ...objectJson(result), CLOSE, EVENT_END];
    if (!("success" in result) && !("content" in result)) {
      const json = objectJson(result);
      if (json.length === 1 && json[0].length <= 2) return [SUCCESS_HEAD, json[0], CLOSE, EVENT_END];
      return [SUCCESS_HEAD, ...json, COMMA, json[0].subarray(1), ...json.slice(1), EVENT_END];
    }
  }
  return [Buffer.from(`data: ${JSON.stringify(cmdEnvelope(outcome, spread))}\n\n`)];
}

/**
 * An object as JSON, in pieces that start with the `{`: a `Base64Bytes` field is its encoded bytes
 * between quotes (base64 needs no escaping), so a 1 MiB chunk is never copied through a JSON string.
 */
function objectJson(object: Record<string, unknown>): [Buffer, ...Buffer[]] {
  const entries = Object.entries(object);
  if (!entries.some(([, value]) => value instanceof Base64Bytes)) {
    return [Buffer.from(JSON.stringify(object))];
  }
  const pieces: Buffer[] = [];
  let text = "{";
  let separator = "";
  for (const [key, value] of entries) {
    const json = value instanceof Base64Bytes ? "" : JSON.stringify(value);
    if (json === undefined) continue;
    text += `${separator}${JSON.stringify(key)}:`;
    separator = ",";
    if (value instanceof Base64Bytes) {
      pieces.push(Buffer.from(text), QUOTE, value.encoded, QUOTE);
      text = "";
    } else {
      text += json;
    }
  }
  pieces.push(Buffer.from(`${text}}`));
  return pieces as [Buffer, ...Buffer[]];
}

/** An object as one JSON text in UTF-8: a `/ws` reply frame (base64 fields skip the string copy). */
export function jsonBytes(object: Record<string, unknown>): Buffer {
  const pieces = objectJson(object);
  if (pieces.length === 1) return pieces[0];
  return Buffer.concat(pieces);
}

/**
 * cua's reply shape `{"success": true, ...result}` (a non-object result becomes `content`): what `/ws`,
 * `/playwright_exec` and each step of `batch` answer.
 */
export function cuaReply(outcome: Outcome): Record<string, unknown> {
  if (!outcome.success) return failureEnvelope(outcome);
  const { result } = outcome;
  if (!isPlainObject(result)) return { success: true, content: result ?? null };
  const { success: _s, ...fields } = result;
  return { success: true, ...fields };
}

function failureEnvelope(outcome: Extract<Outcome, { success: false }>): Record<string, unknown> {
  return { success: false, error: outcome.error, code: outcome.code, ...outcome.fields };
}
