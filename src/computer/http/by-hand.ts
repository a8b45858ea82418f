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
import type { Context } from "hono";
import type { ComputerEnv } from "./env.js";

/** What a route writes on: Node's response, or its stand-in in memory. */
export type HandWritten = Writable & Pick<ServerResponse, "flushHeaders">;

export interface ReplyByHand {
  readonly res: HandWritten;
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
 * (or `flushHeaders()`), so that a quick reply leaves in one packet.
 */
export function replyByHand(
  c: Context<ComputerEnv>,
  status: number,
  headers: Readonly<Record<string, string | number>>,
): ReplyByHand {
  const all = { ...preparedHeaders(c), ...headers };
  const outgoing = c.env?.outgoing;
  if (outgoing) {
    sentByHand(c);
    outgoing.writeHead(status, all);
    return { res: outgoing, done: () => sentByHand(c) };
  }
  const memory = Object.assign(new PassThrough(), { flushHeaders: () => {} });
  const text = Object.fromEntries(Object.entries(all).map(([key, value]) => [key, String(value)]));
  const response = new Response(Readable.toWeb(memory) as ReadableStream<Uint8Array>, {
    status,
    headers: text,
  });
  return { res: memory, done: () => response };
}

/** `replyByHand` for Server-Sent Events: 200 with the event-stream headers. */
export function eventStream(c: Context<ComputerEnv>): ReplyByHand {
  return replyByHand(c, 200, EVENT_STREAM_HEADERS);
}

/** The headers middleware has set so far, to write with the route's own. */
export function preparedHeaders(c: Context): Record<string, string> {
  const headers: Record<string, string> = {};
  c.res.headers.forEach((value, key) => {
    headers[key] = value;
  });
  return headers;
}

/** Tells Hono that the route wrote its reply itself; return what this returns. */
export function sentByHand(c: Context): Response {
  const marker = alreadySent();
  c.res = undefined as unknown as Response;
  c.res = marker;
  return marker;
}

let marker: Response | undefined;
/**
 * The adapter's marker of a reply written by hand (its `RESPONSE_ALREADY_SENT`: a Response with the
 * header `x-hono-already-sent` and no body), made at the first such reply. The adapter's module makes
 * it at import, which loads Node's undici (its web Response) at every start (lazy-node-server.ts).
 * Once the adapter serves, the global Response is its own, whose replies it writes out itself: asking
 * for the body makes it a Node Response, which the adapter leaves alone when marked so.
 */
function alreadySent(): Response {
  if (!marker) {
    marker = new Response(null, { headers: { "x-hono-already-sent": "true" } });
    void marker.body;
  }
  return marker;
}
