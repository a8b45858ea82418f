/**
 * Replies that a route writes itself (SSE streams, file transfers), in one way: `replyByHand` writes
 * the status and the headers, with those middleware prepared (CORS for an allowed page), on Node's
 * response, and tells Hono the reply is already sent (merged into a prepared response, the adapter's
 * marker would be lost and the adapter would write the headers a second time). Without Node's
 * response (`app.request()` in a test) the reply is written into memory and given back as a
 * Response, so that such routes can be tried without a socket.
 *
 * @example
 * const reply = eventStream(c);
 * reply.res.write("data: {}\n\n");
 * reply.res.end();
 * return reply.done();
 */
import type { ServerResponse } from "node:http";
import { PassThrough, Readable, type Writable } from "node:stream";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import type { Context } from "hono";
import { hasCorsHeaders } from "../../common/origin-policy.js";
import type { ComputerEnv } from "./env.js";

/** What a route writes on: Node's response, or its stand-in in memory. */
export type HandWritten = Writable & Pick<ServerResponse, "flushHeaders">;

export interface ReplyByHand {
  readonly res: HandWritten;
  /**
   * Writes the status and the headers, with `extra` ones (a `content-length` once the whole reply
   * is known), unless they are written already. Needed only with `deferHead`.
   */
  head(extra?: Readonly<Record<string, string | number>>): void;
  /** What the route returns: Hono's "already sent", or the reply written into memory. */
  done(): Response;
}

/** The headers of a Server-Sent Events stream (no caching, no buffering by a proxy). */
export const EVENT_STREAM_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "x-accel-buffering": "no",
};

/**
 * Starts a reply the route writes itself. On Node's response the headers wait for the first write
 * (or `flushHeaders()`), so that a quick reply leaves in one packet. With `deferHead`, the status and
 * headers are not even decided until `head()`: a reply written whole can then say its length (no
 * chunked framing).
 */
export function replyByHand(
  c: Context<ComputerEnv>,
  status: number,
  headers: Readonly<Record<string, string | number>>,
  { deferHead = false } = {},
): ReplyByHand {
  const prepared = preparedHeaders(c);
  const all = prepared ? { ...prepared, ...headers } : headers;
  const outgoing = c.env?.outgoing;
  if (outgoing) {
    sentByHand(c);
    const head = (extra?: Readonly<Record<string, string | number>>) => {
      if (!outgoing.headersSent) outgoing.writeHead(status, extra ? { ...all, ...extra } : all);
    };
    if (!deferHead) head();
    return { res: outgoing, head, done: () => sentByHand(c) };
  }
  const memory = Object.assign(new PassThrough(), { flushHeaders: () => {} });
  const text = Object.fromEntries(Object.entries(all).map(([key, value]) => [key, String(value)]));
  const response = new Response(Readable.toWeb(memory) as ReadableStream<Uint8Array>, {
    status,
    headers: text,
  });
  return { res: memory, head: () => {}, done: () => response };
}

/** `replyByHand` for Server-Sent Events: 200 with the event-stream headers. */
export function eventStream(c: Context<ComputerEnv>, options?: { deferHead?: boolean }): ReplyByHand {
  return replyByHand(c, 200, EVENT_STREAM_HEADERS, options);
}

/**
 * The headers middleware has set so far (the origin guard's CORS headers: no other middleware before
 * these routes sets any), to write with the route's own; undefined when there are none (reading
 * `c.res` would build a Response and its Headers for every request).
 */
export function preparedHeaders(c: Context): Record<string, string> | undefined {
  if (!hasCorsHeaders(c)) return undefined;
  const headers: Record<string, string> = {};
  c.res.headers.forEach((value, key) => {
    headers[key] = value;
  });
  return headers;
}

/** Tells Hono that the route wrote its reply itself; return what this returns. */
export function sentByHand(c: Context): Response {
  c.res = undefined as unknown as Response;
  c.res = RESPONSE_ALREADY_SENT;
  return RESPONSE_ALREADY_SENT;
}
