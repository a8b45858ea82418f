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
