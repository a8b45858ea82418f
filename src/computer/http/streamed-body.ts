/**
 * A request body streamed to a file (`/files`' and envd's uploads): its bytes are counted against
 * the limit as they arrive and nothing is kept; past the limit, or when the client leaves before its
 * end, the stream fails. A `Content-Length` above the limit is refused before anything is read.
 */
import type { IncomingMessage } from "node:http";
import { type Readable, Transform } from "node:stream";
import { dropTheRest } from "./body.js";

/** Refuses (with `tooLarge()`, the rest of the body dropped) a body whose `Content-Length` passes `limit`. */
export function checkDeclaredSize(incoming: IncomingMessage, limit: number, tooLarge: () => Error) {
  if (Number(incoming.headers["content-length"]) > limit) {
    dropTheRest(incoming);
    throw tooLarge();
  }
}

/**
 * The body as it arrives, failing with `tooLarge()` past `limit` bytes. The caller drops the rest of
 * a failed body (`dropTheRest`), so that the client reads the answer instead of a reset.
 */
export function limitedBody(incoming: IncomingMessage, limit: number, tooLarge: () => Error): Readable {
  const counted = incoming.pipe(byteLimit(limit, tooLarge));
  incoming.on("error", (err) => counted.destroy(err));
  incoming.on("close", () => {
    if (!incoming.complete)
      counted.destroy(new Error("The client closed the connection before the end of the body"));
  });
  return counted;
}

/** Passes bytes through until more than `limit` have come, then fails with `tooLarge()`. */
export function byteLimit(limit: number, tooLarge: () => Error): Transform {
  let size = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      size += chunk.length;
      if (size > limit) done(tooLarge());
      else done(null, chunk);
    },
  });
}
