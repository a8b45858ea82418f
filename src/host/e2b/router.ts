/**
 * Traffic to the services inside sandboxes, HTTP and WebSocket, streamed both ways: envd's calls
 * (routed by `E2b-Sandbox-Id` and `E2b-Sandbox-Port` when the SDK has `E2B_SANDBOX_URL`), and the
 * per-port URLs `{port}-{sandboxID}.{domain}` that `getHost(port)` gives (routed by `Host`).
 * The proxy is http-proxy-3's; each connection to a sandbox is a tunnel through its desktop's
 * computer server (tunnel.ts), kept for the next request.
 *
 * What is refused, as E2B's proxy refuses it:
 * - envd's control routes (`/init` and the pause hooks): only the control plane calls them;
 * - any port but envd's without the sandbox's traffic token, unless the sandbox was created
 *   public (`network.allowPublicTraffic: true`; unlike E2B, private is the default here). The
 *   token comes as the `e2b-traffic-access-token` header, or once in the query
 *   (`?e2b_traffic_access_token=`) for a browser, which is then given a cookie for that host and
 *   sent back to the same address without it. The token never reaches the sandbox's service.
 * envd checks its own access token itself.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { parse as parseCookies } from "hono/utils/cookie";
import { createProxyServer } from "http-proxy-3";
import { sameText } from "../../common/key-digests.js";
import type { Logger } from "../../common/logger.js";
import { ENVD_INTERNAL_PATHS, ENVD_PORT } from "./envd.js";
import { e2bAnswer } from "./errors.js";
import type { SandboxRecord } from "./sandbox-store.js";
import type { Sandboxes } from "./sandboxes.js";
import { TunnelAgent, TunnelError } from "./tunnel.js";

export const TRAFFIC_TOKEN_HEADER = "e2b-traffic-access-token";
export const TRAFFIC_TOKEN_QUERY = "e2b_traffic_access_token";
const TRAFFIC_TOKEN_COOKIE = "e2b_traffic_access_token";

export interface RouteTarget {
  sandboxID: string;
  port: number;
}

/** A refusal or failure of the router, in E2B's proxy's shape. */
interface Refusal {
  status: number;
  message: string;
  headers?: Record<string, string>;
}

export class SandboxRouter {
  private readonly proxy = createProxyServer({ ws: true, xfwd: false, changeOrigin: false });
  private readonly agents = new Map<string, TunnelAgent>();

  constructor(
    private readonly sandboxes: Sandboxes,
    private readonly log?: Logger,
  ) {
    sandboxes.onGone((sandboxID) => this.forget(sandboxID));
    // Errors are answered per request (the callbacks below); this keeps a late one from throwing.
    this.proxy.on("error", (err) => this.log?.debug({ err }, "e2b router: proxy error"));
  }

  async web(req: IncomingMessage, res: ServerResponse, target: RouteTarget) {
    const answer = (refusal: Refusal) => {
      if (res.headersSent) return res.destroy();
      const body = JSON.stringify({
        sandboxId: target.sandboxID,
        message: refusal.message,
        code: refusal.status,
      });
      res.writeHead(refusal.status, { "content-type": "application/json", ...refusal.headers });
      res.end(body);
    };
    const refusal = await this.prepare(req, target).catch(failure);
    if (refusal) return answer(refusal);
    this.proxy.web(
      req,
      res,
      { target: `http://localhost:${target.port}`, agent: this.agent(target) },
      (err: Error) => answer(proxyFailure(err, target)),
    );
  }

  async ws(req: IncomingMessage, socket: Duplex, head: Buffer, target: RouteTarget) {
    socket.on("error", () => socket.destroy());
    const answer = (refusal: Refusal) => {
      const body = JSON.stringify({
        sandboxId: target.sandboxID,
        message: refusal.message,
        code: refusal.status,
      });
      if (socket.writable) {
        socket.end(
          `HTTP/1.1 ${refusal.status} ${refusal.status === 403 ? "Forbidden" : "Bad Gateway"}\r\n` +
            `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
        );
      }
      socket.destroy();
    };
    const refusal = await this.prepare(req, target, true).catch(failure);
    if (refusal) return answer(refusal);
    this.proxy.ws(
      req,
      socket,
      head,
      { target: `ws://localhost:${target.port}`, agent: this.agent(target, "upgrade") },
      (err: Error) => answer(proxyFailure(err, target)),
    );
  }

  /** Lets go of every kept connection. */
  close() {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
    this.proxy.close();
  }

  /**
   * Looks the sandbox up and decides whether the request may pass; strips the token it came with
   * and sets the `Host` the sandbox asked for. A refusal, or undefined to proxy it.
   */
  private async prepare(
    req: IncomingMessage,
    target: RouteTarget,
    upgrade = false,
  ): Promise<Refusal | undefined> {
    const url = new URL(req.url ?? "/", "http://sandbox");
    if (target.port === ENVD_PORT && ENVD_INTERNAL_PATHS.has(url.pathname)) {
      return {
        status: 403,
        message: `${url.pathname} is envd's control route: only the host service calls it`,
      };
    }
    const { record } = await this.sandboxes.route(target.sandboxID);
    if (target.port !== ENVD_PORT && record.trafficAccessToken) {
      const refusal = admit(req, url, record, upgrade);
      if (refusal) return refusal;
    }
    if (record.maskRequestHost && target.port !== ENVD_PORT) {
      // biome-ignore lint/suspicious/noTemplateCurlyInString: E2B's placeholder for the port in the mask
      req.headers.host = record.maskRequestHost.replaceAll("${PORT}", String(target.port));
    }
    return undefined;
  }

  /**
   * The tunnels to a sandbox's port. An upgrade takes a new connection, never a kept one (as a
   * browser's WebSocket does): a server may not take an upgrade on a connection it has answered
   * on, and one it is closing would leave the handshake without an answer.
   */
  private agent(target: RouteTarget, use: "request" | "upgrade" = "request"): TunnelAgent {
    const key = `${target.sandboxID}:${target.port}:${use}`;
    let agent = this.agents.get(key);
    if (!agent) {
      agent = new TunnelAgent(
        async () => (await this.sandboxes.route(target.sandboxID)).address,
        target.port,
        use === "request",
      );
      this.agents.set(key, agent);
    }
    return agent;
  }

  private forget(sandboxID: string) {
    for (const [key, agent] of this.agents) {
      if (key.startsWith(`${sandboxID}:`)) {
        agent.destroy();
        this.agents.delete(key);
      }
    }
  }
}

/**
 * The traffic token check: from the header, the host's cookie, or the query (then a navigation is
 * sent back without it, with the cookie). The token is removed from what the sandbox sees.
 */
function admit(req: IncomingMessage, url: URL, record: SandboxRecord, upgrade: boolean): Refusal | undefined {
  const expected = record.trafficAccessToken as string;
  const header = req.headers[TRAFFIC_TOKEN_HEADER];
  const cookies = parseCookies(req.headers.cookie ?? "");
  const fromQuery = url.searchParams.get(TRAFFIC_TOKEN_QUERY) ?? undefined;
  const given = (Array.isArray(header) ? header[0] : header) ?? fromQuery ?? cookies[TRAFFIC_TOKEN_COOKIE];
  if (given === undefined || given === "") {
    return {
      status: 403,
      message: `Sandbox is secured with traffic access token. Token header '${TRAFFIC_TOKEN_HEADER}' is missing`,
    };
  }
  if (!sameText(given, expected)) {
    return {
      status: 403,
      message: `Sandbox is secured with traffic access token. Provided token in header '${TRAFFIC_TOKEN_HEADER}' is invalid`,
    };
  }
  delete req.headers[TRAFFIC_TOKEN_HEADER];
  if (cookies[TRAFFIC_TOKEN_COOKIE] !== undefined) {
    const rest = Object.entries(cookies).filter(([name]) => name !== TRAFFIC_TOKEN_COOKIE);
    if (rest.length > 0) req.headers.cookie = rest.map(([name, value]) => `${name}=${value}`).join("; ");
    else delete req.headers.cookie;
  }
  if (fromQuery !== undefined) {
    url.searchParams.delete(TRAFFIC_TOKEN_QUERY);
    req.url = `${url.pathname}${url.search}`;
    if (!upgrade && (req.method === "GET" || req.method === "HEAD")) {
      // A browser opened the link: it keeps the token as this host's cookie, and the address without it.
      return {
        status: 303,
        message: "The token is kept as a cookie for this address",
        headers: {
          location: req.url,
          "set-cookie": `${TRAFFIC_TOKEN_COOKIE}=${encodeURIComponent(given)}; Path=/; HttpOnly; SameSite=Lax`,
        },
      };
    }
  }
  return undefined;
}

/** A failed lookup: E2B's proxy answers 502 for a sandbox it cannot find. */
function failure(err: unknown): Refusal {
  const { code, message } = e2bAnswer(err);
  if (code === 404) return { status: 502, message: "The sandbox was not found" };
  return { status: code >= 500 ? 502 : code, message };
}

function proxyFailure(err: Error, target: RouteTarget): Refusal {
  if (err instanceof TunnelError && err.status === 502) {
    return { status: 502, message: `The sandbox is running but port ${target.port} is not open` };
  }
  if (err instanceof TunnelError && err.status === 404) {
    return {
      status: 502,
      message:
        "The sandbox's desktop cannot relay its ports: its computer server has no /tunnel (its image predates it)",
    };
  }
  return { status: 502, message: `The sandbox's port ${target.port} cannot be reached: ${err.message}` };
}
