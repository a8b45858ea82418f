/**
 * Bytes as commands see them. A handler returns a Buffer with its media type (`Bytes`), and each
 * transport decides how it travels, as Playwright's `tBinary` lets each connection do: `/cmd` and
 * `/ws` write it as base64 text straight from the buffer (http/base64.ts), MCP sends an image as
 * image content, the timeline keeps the Buffer. A parameter of bytes (`base64Param`) is base64 text
 * to clients, and the handler gets a Buffer: the body reader decodes a long one where the schema
 * says bytes, without making a string of it.
 */
import { z } from "zod";

/** A result's bytes and their media type; what a transport makes of them is its own affair. */
export class Bytes {
  #release?: () => void;

  /**
   * @param data the bytes; the handler must not change them afterwards.
   * @param mimeType what they are (`image/png`: MCP sends them as image content).
   * @param options `dataUrl`: clients get a `data:` URL instead of bare base64; `release`: called
   *   once a transport has encoded the bytes (the handler may then reuse `data`'s memory).
   */
  constructor(
    readonly data: Buffer,
    readonly mimeType = "application/octet-stream",
    options: { dataUrl?: boolean; release?: () => void } = {},
  ) {
    this.dataUrl = options.dataUrl ?? false;
    this.#release = options.release;
  }

  readonly dataUrl: boolean;

  get isImage(): boolean {
    return this.mimeType.startsWith("image/");
  }

  /** What clients receive where JSON carries the bytes: base64 text, or a `data:` URL. */
  toJSON(): string {
    return `${this.textPrefix()}${this.data.toString("base64")}`;
  }

  /** What comes before the base64 text: `data:image/png;base64,` for a data URL. */
  textPrefix(): string {
    return this.dataUrl ? `data:${this.mimeType};base64,` : "";
  }

  /** A transport has encoded the bytes: their buffer may be reused (at most once). */
  release() {
    const release = this.#release;
    this.#release = undefined;
    release?.();
  }
}

/**
 * A result field holding `Bytes`: base64 text (or a data URL) in `/commands`, OpenAPI and MCP schemas;
 * `mimeType` (e.g. `image/png`, or `image/*` when it varies) says what the bytes are.
 */
export function bytesField(description: string, options: { mimeType?: string; dataUrl?: boolean } = {}) {
  const { mimeType, dataUrl } = options;
  return z
    .custom<Bytes>((value) => value instanceof Bytes)
    .meta({
      type: "string",
      ...(dataUrl ? { format: "uri" } : { contentEncoding: "base64" }),
      ...(mimeType ? { contentMediaType: mimeType } : {}),
      description,
    });
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
