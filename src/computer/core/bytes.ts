/**
 * Bytes in a command's result that travel as a base64 string (`read_bytes` chunks). They are
 * encoded at once, so the caller may reuse its buffer. `/cmd` writes the encoded text straight into
 * its event instead of escaping and copying a long JSON string (outcome.ts); every other consumer
 * gets the string through `toJSON`.
 */
import { z } from "zod";

export class Base64Bytes {
  /** The base64 text: ASCII only, so it needs no JSON escaping. */
  readonly text: string;

  constructor(bytes: Buffer) {
    this.text = bytes.toString("base64");
  }

  toJSON(): string {
    return this.text;
  }
}

/** The result field for a `Base64Bytes`: a base64 string in `/commands`, OpenAPI and MCP schemas. */
export function base64Field(description: string) {
  return z
    .custom<Base64Bytes>((value) => value instanceof Base64Bytes)
    .meta({ type: "string", contentEncoding: "base64", description });
}

const base64Params = new WeakSet<object>();

/** Whether a parameter's schema is a `base64Param` (which takes bytes already decoded as they are). */
export function isBase64Param(schema: object | undefined): boolean {
  return schema !== undefined && base64Params.has(schema);
}

/** What `/commands`, OpenAPI and MCP say of a `base64Param`: a base64 string. */
export function base64ParamJsonSchema(description?: string): Record<string, unknown> {
  return { type: "string", contentEncoding: "base64", ...(description ? { description } : {}) };
}

/**
 * A parameter of bytes in standard base64: validated and decoded once, in the schema, so that the
 * handler gets a Buffer. Node's decoder skips characters outside the alphabet (and takes url-safe
 * ones), which would shorten the data silently: such text is refused instead.
 *
 * `/cmd` bodies come with their long base64 strings already decoded (see `decodeBase64Text`): such a
 * Buffer is taken as it is, not passed through a transform (a zod transform made V8 keep megabyte
 * chunks until a full collection: three times the slowest writes).
 */
export function base64Param(description: string) {
  const text = z.string().transform((value, ctx) => {
    const data = decodeStrictBase64(value);
    if (!data) {
      ctx.addIssue({ code: "custom", message: "must be standard base64 (A-Z a-z 0-9 + / =)" });
      return z.NEVER;
    }
    return data;
  });
  const param = z
    .union([z.instanceof(Buffer), text], {
      // What is wrong with it as text (it is not bytes either, but a client sends text).
      error: (issue) => (issue.code === "invalid_union" ? issue.errors[1]?.[0]?.message : undefined),
    })
    .meta({ description });
  base64Params.add(param);
  return param;
}

function decodeStrictBase64(text: string): Buffer | null {
  if (text.length % 4 !== 0 || text.includes("-") || text.includes("_")) return null;
  const data = Buffer.from(text, "base64");
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  return data.length === (text.length / 4) * 3 - padding ? data : null;
}

/** Base64 text is decoded this many characters at a time (a multiple of 4). */
const SLICE = 64 * 1024;
const EQUALS = 0x3d;

/**
 * Standard, canonical base64 given as ASCII bytes (a string cut out of a request body), decoded
 * without making one string of it: a string of a megabyte lives outside V8's heap, where it brings
 * the next full collection nearer; slices of 64 KiB are young strings, dropped at the next
 * scavenge. Undefined when it is not that: anything Node's decoder would skip or take as url-safe,
 * a misplaced `=`, padding bits that are not zero (so that encoding the bytes gives the text back).
 */
export function decodeBase64Text(text: Buffer): Buffer | undefined {
  if (text.length === 0 || text.length % 4 !== 0 || text.includes(0x2d) || text.includes(0x5f)) {
    return undefined;
  }
  const padding = text[text.length - 1] !== EQUALS ? 0 : text[text.length - 2] === EQUALS ? 2 : 1;
  const size = (text.length / 4) * 3 - padding;
  const bytes = Buffer.allocUnsafeSlow(size + padding);
  let written = 0;
  for (let at = 0; at < text.length; at += SLICE) {
    written += bytes.write(text.toString("latin1", at, Math.min(at + SLICE, text.length)), written, "base64");
  }
  if (written !== size) return undefined;
  const decoded = bytes.subarray(0, size);
  const last = decoded.subarray(size - (3 - padding)).toString("base64");
  return last === text.toString("latin1", text.length - 4) ? decoded : undefined;
}
