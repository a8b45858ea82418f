/**
 * JSON of a command's reply as pieces of bytes, for the transports that write it themselves (`/cmd`
 * events, `/ws` frames): the result's `Bytes` fields are written as base64 straight from a buffer.
 */
import { Bytes } from "../core/bytes.js";
import { Base64Bytes } from "./base64.js";

/** Encodings of bytes fields still being written; `releaseEncodings` once they have been. */
export type HeldEncodings = Base64Bytes[];

/**
 * An object as JSON, in pieces that start with the `{`: a `Bytes` field is its base64 text, encoded
 * into a pooled buffer, between quotes (base64 needs no escaping), so a 1 MiB chunk is never copied
 * through a JSON string. The field's own buffer is released once encoded; the encoding goes into
 * `held` (without `held` it is simply not reused). Bytes deeper in plain objects and arrays (an
 * agent reply's image inside its tool result) are written the same way; the rest is
 * `JSON.stringify`'s text.
 */
export function objectJson(object: Record<string, unknown>, held?: HeldEncodings): [Buffer, ...Buffer[]] {
  if (!holdsBytes(object, 0)) return [Buffer.from(JSON.stringify(object))];
  const out: JsonPieces = { pieces: [], text: "", held };
  writeValue(object, out, false);
  out.pieces.push(Buffer.from(out.text));
  return out.pieces as [Buffer, ...Buffer[]];
}

/**
 * How deep `Bytes` are looked for: an Anthropic tool result's image is at depth 5
 * (`tool_result.content[0].source.data`); deeper ones go through `toJSON`.
 */
const MAX_DEPTH = 6;

interface JsonPieces {
  pieces: Buffer[];
  /** JSON text not yet made a piece. */
  text: string;
  held?: HeldEncodings;
}

/** A plain object or array (what JSON.stringify walks without a `toJSON` of its own). */
function walkable(value: unknown): value is Record<string, unknown> | unknown[] {
  if (typeof value !== "object" || value === null) return false;
  if (Array.isArray(value)) return true;
  const proto = Object.getPrototypeOf(value);
  return (
    (proto === Object.prototype || proto === null) &&
    typeof (value as { toJSON?: unknown }).toJSON !== "function"
  );
}

/** Whether `objectJson` finds `Bytes` in the object (at any depth it looks). */
export function hasBytes(object: Record<string, unknown>): boolean {
  return holdsBytes(object, 0);
}

function holdsBytes(value: unknown, depth: number): boolean {
  if (value instanceof Bytes) return true;
  if (depth >= MAX_DEPTH || !walkable(value)) return false;
  if (Array.isArray(value)) {
    for (const item of value) if (holdsBytes(item, depth + 1)) return true;
    return false;
  }
  for (const key in value) if (holdsBytes(value[key], depth + 1)) return true;
  return false;
}

/** Appends `value`'s JSON; false when it has none (undefined, a function: left out of objects). */
function writeValue(value: unknown, out: JsonPieces, inArray: boolean, depth = 0): boolean {
  if (value instanceof Bytes) {
    const encoded = new Base64Bytes(value.data);
    value.release();
    out.held?.push(encoded);
    out.pieces.push(Buffer.from(`${out.text}"${value.textPrefix()}`), encoded.encoded);
    out.text = '"';
    return true;
  }
  if (!walkable(value) || !holdsBytes(value, depth)) {
    const json = JSON.stringify(value);
    if (json === undefined) {
      if (!inArray) return false;
      out.text += "null";
      return true;
    }
    out.text += json;
    return true;
  }
  if (Array.isArray(value)) {
    out.text += "[";
    value.forEach((item, i) => {
      if (i > 0) out.text += ",";
      writeValue(item, out, true, depth + 1);
    });
    out.text += "]";
    return true;
  }
  out.text += "{";
  let separator = "";
  for (const [key, item] of Object.entries(value)) {
    const before = out.text;
    out.text += `${separator}${JSON.stringify(key)}:`;
    if (writeValue(item, out, false, depth + 1)) separator = ",";
    else out.text = before;
  }
  out.text += "}";
  return true;
}

/** The encodings' buffers may be reused: what they were written into has them. */
export function releaseEncodings(held: HeldEncodings) {
  for (const encoding of held) encoding.release();
  held.length = 0;
}

/** An object as one JSON text in UTF-8: a `/ws` reply frame (bytes fields skip the string copy). */
export function jsonBytes(object: Record<string, unknown>): Buffer {
  const held: HeldEncodings = [];
  const pieces = objectJson(object, held);
  if (pieces.length === 1) return pieces[0];
  const joined = Buffer.concat(pieces);
  releaseEncodings(held);
  return joined;
}
