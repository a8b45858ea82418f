/**
 * Cloud mode authentication for the computer server, as Hono middleware.
 *
 * Every route it guards needs `X-Container-Name` equal to the server's container name and a key in
 * `X-API-Key` (or `Authorization: Bearer <key>`). A WebSocket upgrade on a guarded route (the PTY
 * sockets, `/pty/{pid}/ws`, and no other route) may pass `container_name` and `api_key` as query
 * parameters instead, as the reference's clients do. Failures answer 401 `{"detail": "Container name required" | "API key required" |
 * "Authentication failed"}`, checked in that order; an address with too many failures gets 429.
 * `/ws` is not guarded here: it authenticates with its first frame (see `../transports/ws/ws.ts`).
 *
 * @example
 * app.use("*", cloudAuth({ containerName: "vm-1", keys: ["sha256:9f86d0…"] }));
 * app.use("*", cloudAuth({ containerName: "vm-1", verify: remoteVerifier({ baseUrl: "https://auth.example" }) }));
 */
import type { HttpBindings } from "@hono/node-server";
import type { Context, MiddlewareHandler } from "hono";
import { Authenticator, type CloudAuthOptions, type Credentials } from "./authenticator.js";

export { KeyDigests, parseKeyLines, parseKeyList } from "../../common/key-digests.js";
export {
  AUTH_MESSAGES,
  Authenticator,
  type AuthResult,
  type CloudAuthOptions,
  type Credentials,
} from "./authenticator.js";
export { FailureLimiter, type FailureLimiterOptions } from "./limiter.js";
export { type KeyVerifier, remoteVerifier } from "./verifier.js";

export function cloudAuth(
  options: CloudAuthOptions | Authenticator,
): MiddlewareHandler<{ Bindings: HttpBindings }> {
  const authenticator = options instanceof Authenticator ? options : new Authenticator(options);
  return async function cloudAuthMiddleware(c, next) {
    const result = await authenticator.check(credentialsOf(c), clientAddress(c));
    if (result.ok) return next();
    if (result.retryAfterSeconds) c.header("retry-after", String(result.retryAfterSeconds));
    return c.json({ detail: result.detail }, result.status);
  };
}

/**
 * The routes whose WebSocket upgrade may carry the key in the query (the PTY sockets, whose clients
 * cannot set headers). Nowhere else: query strings end up in proxy and access logs.
 */
const QUERY_KEY_ROUTE = /^\/pty\/[^/]+\/ws$/;

/**
 * The key from `X-API-Key`, else from `Authorization: Bearer`; header names are case-insensitive.
 * On a WebSocket upgrade of a `QUERY_KEY_ROUTE`, also `api_key` and `container_name` in the query.
 */
function credentialsOf(c: Context): Credentials {
  const credentials = headerCredentials((name) => c.req.header(name));
  if (c.req.header("upgrade")?.toLowerCase() === "websocket" && QUERY_KEY_ROUTE.test(c.req.path)) {
    credentials.containerName ||= c.req.query("container_name");
    credentials.apiKey ||= c.req.query("api_key");
  }
  return credentials;
}

/** The container name and the key from a request's headers (`get`: a header by its lower-case name). */
export function headerCredentials(get: (name: string) => string | undefined): Credentials {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(get("authorization") ?? "")?.[1];
  return { containerName: get("x-container-name"), apiKey: get("x-api-key") || bearer };
}

/** The peer's address (proxy headers are not trusted: anyone can send them). */
export function clientAddress(c: Context<{ Bindings: HttpBindings }>): string {
  return c.env?.incoming?.socket?.remoteAddress ?? "unknown";
}
