/**
 * A `multipart/form-data` body read as it streams in (RFC 7578): each part's body is handed on as a
 * stream while its bytes arrive, so an upload of any size goes to disk without being held in memory,
 * and the request waits while the disk does (backpressure). Only what a file upload needs: part
 * headers (`Content-Disposition`'s `name` and `filename`), no nested multiparts, no charset rules.
 *
 * The platform (undici's `Request.formData()`) parses a body only once the whole of it is in memory,
 * and the server has no streaming parser among its dependencies: this is that parser, small and
 * bounded (part headers are limited; the body limit is the caller's).
 */
import { once } from "node:events";
import { PassThrough, type Readable } from "node:stream";

export interface MultipartPart {
  /** The form field's name (`Content-Disposition: form-data; name="…"`). */
  readonly name: string;
  /** The file name the client gave, when the part is a file. */
  readonly filename?: string;
  /** The part's bytes, as they arrive; read it to the end (or destroy it) for the next part to come. */
  readonly body: Readable;
}

/** A body that is not well-formed multipart: a client error. */
export class MultipartError extends Error {}

/** Largest header block of one part. */
const MAX_HEADER_BYTES = 16 * 1024;

/** The boundary of a `multipart/*` content type, or undefined when it has none. */
export function multipartBoundary(contentType: string | undefined): string | undefined {
  const match = /^multipart\/[\w.+-]+\s*;(.*)$/i.exec(contentType ?? "");
  if (!match) return undefined;
  const param = /(?:^|;)\s*boundary\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]+))/i.exec(match[1]);
  const boundary = param?.[1]?.replace(/\\(.)/g, "$1") ?? param?.[2];
  return boundary && boundary.length <= 70 ? boundary : undefined;
}

/**
 * Reads the multipart body from `source` and calls `onPart` for each part, one at a time: the next
 * part is read once `onPart`'s promise has settled (its body read to the end). Rejects with a
 * `MultipartError` on a malformed body, or with what `onPart` or the source threw.
 */
export async function readMultipart(
  source: AsyncIterable<Buffer>,
  boundary: string,
  onPart: (part: MultipartPart) => Promise<void>,
): Promise<void> {
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  // The body starts with the first delimiter (no preamble before it, in practice): scanning starts
  // as if a line break came first.
  let buffer: Buffer = Buffer.from("\r\n");
  let state: "preamble" | "afterDelimiter" | "headers" | "body" | "done" = "preamble";
  let part: { body: PassThrough; handled: Promise<void> } | undefined;

  const finishPart = async () => {
    if (!part) return;
    const current = part;
    part = undefined;
    current.body.end();
    await current.handled;
  };

  try {
    for await (const chunk of source) {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      for (;;) {
        if (state === "preamble") {
          const at = buffer.indexOf(delimiter);
          if (at < 0) {
            buffer = buffer.subarray(Math.max(0, buffer.length - delimiter.length + 1));
            break;
          }
          buffer = buffer.subarray(at + delimiter.length);
          state = "afterDelimiter";
        } else if (state === "afterDelimiter") {
          if (buffer.length < 2) break;
          if (buffer[0] === 0x2d && buffer[1] === 0x2d) {
            state = "done";
            break;
          }
          // Transport padding (spaces, tabs) may come before the line break.
          const lineEnd = buffer.indexOf("\r\n");
          if (lineEnd < 0) {
            if (buffer.length > 1024)
              throw new MultipartError("malformed multipart body: no line break after a boundary");
            break;
          }
          if (!/^[ \t]*$/.test(buffer.subarray(0, lineEnd).toString("latin1")))
            throw new MultipartError("malformed multipart body: text after a boundary");
          buffer = buffer.subarray(lineEnd + 2);
          state = "headers";
        } else if (state === "headers") {
          const end = buffer.indexOf("\r\n\r\n");
          const blank = buffer.subarray(0, 2).toString("latin1") === "\r\n";
          if (end < 0 && !blank) {
            if (buffer.length > MAX_HEADER_BYTES)
              throw new MultipartError("a multipart part's headers are too large");
            break;
          }
          const headerText = blank ? "" : buffer.subarray(0, end).toString("utf8");
          buffer = buffer.subarray(blank ? 2 : end + 4);
          const body = new PassThrough({ highWaterMark: 1024 * 1024 });
          // A body cut short is destroyed with an error, which its reader sees (a stream keeps its
          // error); before the reader listens, it must not be an unhandled 'error' event.
          body.on("error", () => undefined);
          const { name, filename } = disposition(headerText);
          part = { body, handled: onPart({ name, filename, body }) };
          // A handler that fails stops the reading; its error is the one reported.
          part.handled.catch(() => body.destroy());
          state = "body";
        } else if (state === "body") {
          const at = buffer.indexOf(delimiter);
          // Bytes that cannot be the start of a delimiter go to the part now.
          const safe = at >= 0 ? at : Math.max(0, buffer.length - delimiter.length + 1);
          if (safe > 0) {
            const current = part!;
            if (!current.body.write(buffer.subarray(0, safe))) {
              await Promise.race([once(current.body, "drain"), current.handled.then(() => undefined)]);
            }
            buffer = buffer.subarray(safe);
          }
          if (at < 0) break;
          buffer = buffer.subarray(delimiter.length);
          await finishPart();
          state = "afterDelimiter";
        } else {
          break;
        }
      }
      if (state === "done") break;
    }
  } finally {
    if (part) part.body.destroy(new MultipartError("the multipart body ended inside a part"));
  }
  if (state !== "done") {
    if (part) await part.handled.catch(() => undefined);
    throw new MultipartError("the multipart body ended before its closing boundary");
  }
}

/** `name` and `filename` of a part's `Content-Disposition: form-data; …` header. */
function disposition(headers: string): { name: string; filename?: string } {
  const line = headers.split("\r\n").find((h) => /^content-disposition\s*:/i.test(h));
  if (!line) throw new MultipartError("a multipart part has no Content-Disposition header");
  const params: Record<string, string> = {};
  const pattern = /;\s*([\w*-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))/g;
  for (let match = pattern.exec(line); match; match = pattern.exec(line)) {
    params[match[1].toLowerCase()] = match[2] !== undefined ? match[2].replace(/\\(.)/g, "$1") : match[3];
  }
  if (params.name === undefined) throw new MultipartError("a multipart part has no name");
  return { name: params.name, filename: params.filename };
}
