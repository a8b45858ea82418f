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

/**
 * A parameter of bytes in standard base64: validated and decoded once, in the schema, so that the
 * handler gets a Buffer. Node's decoder skips characters outside the alphabet (and takes url-safe
 * ones), which would shorten the data silently: such text is refused instead.
 */
export function base64Param(description: string) {
  return z
    .string()
    .meta({ contentEncoding: "base64", description })
    .transform((text, ctx) => {
      const data = decodeStrictBase64(text);
      if (!data) {
        ctx.addIssue({ code: "custom", message: "must be standard base64 (A-Z a-z 0-9 + / =)" });
        return z.NEVER;
      }
      return data;
    });
}

function decodeStrictBase64(text: string): Buffer | null {
  if (text.length % 4 !== 0 || text.includes("-") || text.includes("_")) return null;
  const data = Buffer.from(text, "base64");
  const padding = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  return data.length === (text.length / 4) * 3 - padding ? data : null;
}
