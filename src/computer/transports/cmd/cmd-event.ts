/** The `/cmd` event: the outcome framed as cua's clients read it, written as pieces of bytes. */
import { failureEnvelope, isPlainObject, type Outcome } from "../../core/outcome.js";
import { type HeldEncodings, hasBytes, objectJson } from "../../http/json-pieces.js";

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
const EVENT_END = Buffer.from("\n\n");

/** The number of bytes the pieces of an event take on the wire. */
export function eventLength(pieces: readonly Buffer[]): number {
  return pieces.reduce((n, piece) => n + piece.length, 0);
}

/**
 * The `/cmd` event as pieces, `data: {json}\n\n`. An object result is serialized once; with the
 * spread copy its pieces are written twice (as `content` and as the fields beside it), which halves
 * the cost for large results such as screenshots and file chunks. Its bytes fields are encoded into
 * pooled buffers, added to `held`: release them once the event has been written.
 */
export function cmdEventBytes(outcome: Outcome, spread: boolean, held?: HeldEncodings): Buffer[] {
  if (outcome.success && isPlainObject(outcome.result)) {
    const result = outcome.result;
    if (!spread) return [SUCCESS_HEAD, ...objectJson(result, held), CLOSE, EVENT_END];
    if (!("success" in result) && !("content" in result)) {
      const json = objectJson(result, held);
      if (json.length === 1 && json[0].length <= 2) return [SUCCESS_HEAD, json[0], CLOSE, EVENT_END];
      return [SUCCESS_HEAD, ...json, COMMA, json[0].subarray(1), ...json.slice(1), EVENT_END];
    }
  }
  return [Buffer.from(`data: ${JSON.stringify(cmdEnvelope(outcome, spread))}\n\n`)];
}

/**
 * The `/cmd` event as one text, the same as `cmdEventBytes` joined, for an outcome without bytes
 * fields (most are small: they leave in one write, with no buffer made on the way); undefined when
 * the result has bytes fields, top-level or nested, which go through `cmdEventBytes`.
 */
export function cmdEventText(outcome: Outcome, spread: boolean): string | undefined {
  if (outcome.success && isPlainObject(outcome.result)) {
    const result = outcome.result;
    // Bytes anywhere objectJson looks (an agent's image inside its tool result) are its to write.
    if (hasBytes(result)) return undefined;
    if (!spread) return `data: {"success":true,"content":${JSON.stringify(result)}}\n\n`;
    if (!("success" in result) && !("content" in result)) {
      const json = JSON.stringify(result);
      if (json.length <= 2) return `data: {"success":true,"content":${json}}\n\n`;
      return `data: {"success":true,"content":${json},${json.slice(1)}\n\n`;
    }
  }
  return `data: ${JSON.stringify(cmdEnvelope(outcome, spread))}\n\n`;
}
