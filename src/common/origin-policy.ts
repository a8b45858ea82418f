/**
 * Who may talk to a local service from a web browser: both servers refuse web pages of other sites.
 *
 * A page the user merely visits can send "simple" requests (a POST with `text/plain`, no preflight)
 * to `127.0.0.1`, and through DNS rebinding (its own name resolving to 127.0.0.1) even read the
 * replies. Programs (curl, the SDKs, cua's clients) send no `Origin` and are not affected. So:
 *
 * - a request with an `Origin` header is refused (403) unless that origin was allowed
 *   (`--allow-origin`), or it is the service's own origin reached by an IP address, a loopback name
 *   or an allowed host name (a page the service serves itself; rebinding always uses a foreign name);
 * - a request a browser marks as coming from another site (`Sec-Fetch-Site`) without an `Origin`
 *   (an `<img>` or `<script>` tag, say) is refused too, except a top-level navigation;
 * - when the service listens on loopback, the `Host` header must be a loopback name or address
 *   (`localhost`, `*.localhost`, `127.x.y.z`, `[::1]`, any port) or an allowed host (`--allow-host`): the guard
 *   against DNS rebinding. On other addresses that check applies only when hosts were allowed.
 *
 * Allowed origins get CORS headers (credentials only for origins named one by one); `*` allows every
 * origin and is accepted only where the service authenticates its clients.
 *
 * @example
 * const policy = new OriginPolicy({ listenHost: "127.0.0.1", allowOrigins: ["http://localhost:3000"] });
 * app.use(originGuard(policy, (message) => ({ detail: message })));
 */
import type { IncomingMessage } from "node:http";
import { isIP } from "node:net";
import type { MiddlewareHandler } from "hono";

export interface OriginPolicyOptions {
  /** The address the service listens on: a loopback address turns the `Host` check on. */
  listenHost: string;
  /** Origins (`https://app.example:8080`) allowed to call the service from a browser, or `*`. */
  allowOrigins?: string[];
  /** Host names (no port) accepted in `Host` besides the loopback ones. */
  allowHosts?: string[];
  /** Whether the service authenticates every request: `*` is refused without it. */
  authenticated?: boolean;
  /** What to add to a refusal so that a person knows how to allow the request (the flag's name). */
  hints?: { origin: string; host: string };
}

export type Verdict =
  | { ok: true; cors?: { origin: string; credentials: boolean } }
  | { ok: false; reason: string };

const DEFAULT_HINTS = { origin: "--allow-origin", host: "--allow-host" };

export class OriginPolicy {
  private readonly origins: Set<string>;
  private readonly anyOrigin: boolean;
  private readonly hosts: Set<string>;
  private readonly checkHost: boolean;
  private readonly hints: { origin: string; host: string };
  private lastHost?: { host: string; refusal: string };

  constructor(options: OriginPolicyOptions) {
    const origins = options.allowOrigins ?? [];
    this.anyOrigin = origins.includes("*");
    if (this.anyOrigin && !options.authenticated) {
      throw new Error(
        "allowing every origin ('*') needs authentication, or any web page could drive this service: " +
          "name the origins one by one instead",
      );
    }
    this.origins = new Set(origins.filter((o) => o !== "*").map(normalizeOrigin));
    this.hosts = new Set((options.allowHosts ?? []).map(normalizeHostName));
    this.checkHost = isLoopbackName(options.listenHost) || this.hosts.size > 0;
    this.hints = options.hints ?? DEFAULT_HINTS;
  }

  /** Decides on one request from its `Origin`, `Host` and `Sec-Fetch-*` headers. */
  check(headers: { origin?: string; host?: string; fetchSite?: string; fetchMode?: string }): Verdict {
    const host = headers.host?.trim().toLowerCase();
    if (this.checkHost && host !== undefined) {
      const refusal = this.hostRefusal(host);
      if (refusal) return { ok: false, reason: refusal };
    }
    const origin = headers.origin?.trim();
    if (origin === undefined || origin === "") {
      const site = headers.fetchSite?.toLowerCase();
      if ((site === "cross-site" || site === "same-site") && headers.fetchMode !== "navigate") {
        return { ok: false, reason: "Requests from web pages of other sites are refused" };
      }
      return { ok: true };
    }
    if (this.anyOrigin) return { ok: true, cors: { origin: "*", credentials: false } };
    const normal = tryNormalizeOrigin(origin);
    if (normal && this.origins.has(normal)) return { ok: true, cors: { origin, credentials: true } };
    if (normal && host !== undefined && this.isOwnOrigin(normal, host)) return { ok: true };
    return {
      ok: false,
      reason:
        `Origin '${origin}' is refused: web pages of other origins may not use this server` +
        (normal ? `; start it with ${this.hints.origin} ${normal} to allow that page` : ""),
    };
  }

  /** Why `host` is refused, or "" when it is accepted; the last verdict is kept (clients repeat it). */
  private hostRefusal(host: string): string {
    if (host === this.lastHost?.host) return this.lastHost.refusal;
    const name = hostNameOf(host);
    const refusal =
      name !== undefined && (isLoopbackName(name) || this.hosts.has(name))
        ? ""
        : `Host '${host}' is refused: this server answers only to loopback names ` +
          `(localhost, 127.0.0.1, [::1]) as a guard against DNS rebinding` +
          (name ? `; start it with ${this.hints.host} ${name} to accept this name` : "");
    this.lastHost = { host, refusal };
    return refusal;
  }

  /**
   * The page this service served itself: the origin names the host the request was sent to, by an
   * address or a name that cannot be rebound.
   */
  private isOwnOrigin(origin: string, host: string): boolean {
    const url = new URL(origin);
    let target: URL;
    try {
      target = new URL(`${url.protocol}//${host}`);
    } catch {
      return false;
    }
    if (target.host !== url.host) return false;
    const name = url.hostname;
    return isIP(name.replace(/^\[|\]$/g, "")) !== 0 || isLoopbackName(name) || this.hosts.has(name);
  }
}

/** The headers the policy decides on. */
export type PolicyHeaders = { origin?: string; host?: string; fetchSite?: string; fetchMode?: string };

/** The headers the policy decides on, read with `get` (a header's value by its lower-case name). */
export function policyHeaders(get: (name: string) => string | undefined): PolicyHeaders {
  return {
    origin: get("origin"),
    host: get("host"),
    fetchSite: get("sec-fetch-site"),
    fetchMode: get("sec-fetch-mode"),
  };
}

/**
 * The Hono middleware: refuses what the policy refuses with 403 and `body(message)`, answers the
 * CORS preflight of an allowed origin, and adds the CORS headers to its replies. It goes first, so
 * that every route and every WebSocket upgrade is covered.
 */
export function originGuard(
  policy: OriginPolicy,
  body: (message: string) => Record<string, unknown>,
  onRefuse?: (reason: string, headers: { origin?: string; host?: string }) => void,
): MiddlewareHandler {
  return async function originGuard(c, next) {
    // Node's parsed headers when served by @hono/node-server: `c.req.header()` would build a whole
    // Headers object for every request.
    const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
    const headers = policyHeaders(
      incoming ? (name) => nodeHeader(incoming, name) : (name) => c.req.header(name),
    );
    const verdict = policy.check(headers);
    if (!verdict.ok) {
      onRefuse?.(verdict.reason, headers);
      return c.json(body(verdict.reason), 403);
    }
    const cors = verdict.cors;
    if (!cors) return next();
    // Set on the response being prepared: Hono carries these over to whatever the route returns.
    const set = (name: string, value: string) => c.res.headers.set(name, value);
    for (const [name, value] of Object.entries(corsHeaders(cors))) {
      if (name === "vary") c.res.headers.append(name, value);
      else set(name, value);
    }
    if (c.req.method === "OPTIONS" && c.req.header("access-control-request-method")) {
      set("access-control-allow-methods", "GET, HEAD, POST, PUT, PATCH, DELETE");
      const asked = c.req.header("access-control-request-headers");
      if (asked) set("access-control-allow-headers", asked);
      set("access-control-max-age", "600");
      return new Response(null, { status: 204, headers: c.res.headers });
    }
    return next();
  };
}

/** The CORS headers of a reply to an allowed page (not a preflight's). */
export function corsHeaders(cors: { origin: string; credentials: boolean }): Record<string, string> {
  const headers: Record<string, string> = { "access-control-allow-origin": cors.origin };
  if (cors.origin !== "*") headers.vary = "Origin";
  if (cors.credentials) headers["access-control-allow-credentials"] = "true";
  headers["access-control-expose-headers"] = "mcp-session-id, mcp-protocol-version";
  return headers;
}

/** A header of a Node request by its lower-case name (the first, when it came more than once). */
export function nodeHeader(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * `127.0.0.0/8`, `::1` (bracketed or not), `localhost` and every `*.localhost` name (RFC 6761:
 * browsers resolve them to loopback themselves, so no page can rebind one; the host service's E2B
 * listener names sandboxes' ports so, and the tunnel brings those names to the desktop's services).
 */
export function isLoopbackName(name: string): boolean {
  const bare = name.toLowerCase().replace(/^\[|\]$/g, "");
  if (bare === "localhost" || bare.endsWith(".localhost") || bare === "::1") return true;
  return isIP(bare) === 4 && bare.startsWith("127.");
}

/** Checks and normalizes an origin given on the command line; throws a sentence when it is not one. */
export function normalizeOrigin(value: string): string {
  const normal = tryNormalizeOrigin(value);
  if (!normal) {
    throw new Error(`'${value}' is not an origin: expected scheme://host[:port], e.g. http://localhost:3000`);
  }
  return normal;
}

function tryNormalizeOrigin(value: string): string | undefined {
  try {
    const url = new URL(value);
    if (url.protocol !== "http:" && url.protocol !== "https:") return undefined;
    if (url.pathname !== "/" || url.search || url.hash || url.username) return undefined;
    return url.origin;
  } catch {
    return undefined;
  }
}

/** Checks and normalizes a host name given on the command line (`--allow-host`). */
export function normalizeHostName(value: string): string {
  const name = value.includes(":") ? undefined : hostNameOf(value.trim().toLowerCase());
  if (!name) {
    throw new Error(`'${value}' is not a host name: expected a name such as my-vm.local, without a port`);
  }
  return name;
}

/** The host name of a `Host` header value (`name:port`, `[v6]:port`), or undefined if malformed. */
function hostNameOf(host: string): string | undefined {
  try {
    const url = new URL(`http://${host}`);
    if (url.pathname !== "/" || url.username || url.search) return undefined;
    return url.hostname;
  } catch {
    return undefined;
  }
}

/** Origins from a comma-separated variable (`HANGAR_ALLOW_ORIGINS`) plus repeated flags. */
export function listFrom(flags: string[] | undefined, variable: string | undefined): string[] {
  const fromEnv = (variable ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return [...fromEnv, ...(flags ?? [])];
}
