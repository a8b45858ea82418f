/**
 * Replies that a route writes itself on Node's response (SSE streams, file transfers): the headers
 * middleware prepared (CORS for an allowed page) go out with them, and Hono is told the reply is
 * already sent. Merged into a prepared response, the adapter's marker would be lost and the adapter
 * would write the headers a second time.
 */
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import type { Context } from "hono";

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
  c.res = undefined as unknown as Response;
  c.res = RESPONSE_ALREADY_SENT;
  return RESPONSE_ALREADY_SENT;
}
