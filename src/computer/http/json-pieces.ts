/**
 * JSON of a command's reply as pieces of bytes, for the transports that write it themselves (`/cmd`
 * events, `/ws` frames): the result's `Bytes` fields are written as base64 straight from a buffer.
 */
import { Bytes } from "../core/bytes.js";
import { Base64Bytes } from "./base64.js";

const QUOTE = Buffer.from('"');

/** Encodings of bytes fields still being written; `releaseEncodings` once they have been. */
export type HeldEncodings = Base64Bytes[];

/**
 * An object as JSON, in pieces that start with the `{`: a `Bytes` field is its base64 text, encoded
 * into a pooled buffer, between quotes (base64 needs no escaping), so a 1 MiB chunk is never copied
 * through a JSON string. The field's own buffer is released once encoded; the encoding goes into
 * `held` (without `held` it is simply not reused). Bytes deeper in the object go through `toJSON`.
 */
export function objectJson(object: Record<string, unknown>, held?: HeldEncodings): [Buffer, ...Buffer[]] {
  const entries = Object.entries(object);
  if (!entries.some(([, value]) => value instanceof Bytes)) {
    return [Buffer.from(JSON.stringify(object))];
  }
  const pieces: Buffer[] = [];
  let text = "{";
  let separator = "";
  for (const [key, value] of entries) {
    const json = value instanceof Bytes ? "" : JSON.stringify(value);
    if (json === undefined) continue;
    text += `${separator}${JSON.stringify(key)}:`;
    separator = ",";
    if (value instanceof Bytes) {
      const encoded = new Base64Bytes(value.data);
      value.release();
      held?.push(encoded);
      pieces.push(Buffer.from(`${text}"${value.textPrefix()}`), encoded.encoded, QUOTE);
      text = "";
    } else {
      text += json;
    }
  }
  pieces.push(Buffer.from(`${text}}`));
  return pieces as [Buffer, ...Buffer[]];
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
