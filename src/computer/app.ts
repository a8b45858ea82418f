/**
 * The computer server's HTTP surface: `/status`, `/commands`, `/openapi.json` and `POST /cmd`.
 * Transports only parse, frame and write; every command goes through `registry.run()`.
 */
import { readFileSync } from "node:fs";
import type { IncomingMessage, RequestListener } from "node:http";
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { type Logger, silentLogger } from "../common/logger.js";
import {
  corsHeaders,
  nodeHeader,
  OriginPolicy,
  originGuard,
  policyHeaders,
} from "../common/origin-policy.js";
import { pageHtml, pageRoutes } from "../common/web-page.js";
import { type Authenticator, headerCredentials } from "./auth/index.js";
import { commandCatalog, openApiDocument } from "./core/catalog.js";
import type { CommandRegistry } from "./core/registry.js";
import type { ComputerEnv } from "./http/env.js";
import { cmdListener, cmdRoutes, type GateVerdict, type NodeGate } from "./transports/cmd/cmd.js";
import { type ConsoleOptions, consoleRoutes } from "./transports/console/console-routes.js";
import { ShareLinks, sharedRoutes, shareRoutes } from "./transports/console/share.js";
import { fileRoutes } from "./transports/files/files-http.js";
import { mcpOpenApiPaths } from "./transports/mcp/mcp-openapi.js";
import type { CommandMetrics } from "./transports/metrics/metrics.js";
import { playwrightRoutes } from "./transports/playwright/playwright.js";
import { ptyRoutes } from "./transports/pty/pty.js";
import { ptyOpenApiPaths } from "./transports/pty/pty-openapi.js";
import type { PtySessions } from "./transports/pty/pty-sessions.js";
import { type RecordingRoutesOptions, recordingRoutes } from "./transports/recordings/recording-routes.js";
import { tunnelRoutes } from "./transports/tunnel/tunnel.js";

export interface ComputerAppOptions {
  registry: CommandRegistry;
  log?: Logger;
  /** Copy a result's fields beside `content` on `/cmd` (cua clients need it). Default on. */
  spreadResult?: boolean;
  /** Largest request body in bytes (default 64 MiB). */
  bodyLimitBytes?: number;
  /** Names reported in `/status` `features`. */
  features?: string[];
  /** Where the launch's id is read for `/status` (default `BOOT_ID_FILE`). */
  bootIdFile?: string;
  /**
   * Which web pages may use the server (see origin-policy.ts). Default: none but its own, and only
   * loopback names in `Host`.
   */
  originPolicy?: OriginPolicy;
  /** Runs before every route but `/status` (cloud auth). */
  auth?: MiddlewareHandler<ComputerEnv>;
  /** Terminal sessions: serves the PTY routes (`/pty…`) when given. */
  pty?: PtySessions;
  /** `GET /ws` (see ws.ts); mounted before `auth` because it authenticates with its first frame. */
  websocket?: MiddlewareHandler<ComputerEnv>;
  /** The web console (page, activity timeline, live view); see console-routes.ts. */
  console?: Omit<ConsoleOptions, "registry" | "features">;
  /** Video recordings and trajectories (`GET /recordings`, …); see recording-routes.ts. */
  recordings?: RecordingRoutesOptions;
  /** Prometheus metrics at `GET /metrics`, behind the same keys as `/cmd`. */
  metrics?: CommandMetrics;
}

export const DEFAULT_BODY_LIMIT = 64 * 1024 * 1024;
const UNSUPPORTED = ["diorama_cmd", "/responses"];

export function osType(): "linux" | "darwin" | "windows" {
  if (process.platform === "win32") return "windows";
  if (process.platform === "darwin") return "darwin";
  return "linux";
}

/**
 * Where a guest's agent (`hangar-snapshot-clock`) writes the id the host service gives each launch
 * of the VM through fw_cfg: a restore or a fork of a snapshot has an id of its own, while the
 * kernel's boot id is the snapshot's.
 */
export const BOOT_ID_FILE = "/run/hangar-boot-id";

/**
 * The body of `GET /status` (the server also answers it before its app's adapter is loaded), with
 * `boot_id` where the launch's id is known, so that a client can tell forks of one snapshot apart.
 * The JSON is made again only when the id changes.
 */
export function statusBody(features: string[] = [], bootIdFile = BOOT_ID_FILE): () => string {
  const base = {
    status: "ok",
    os_type: osType(),
    features,
    // What cua's server has and this one answers with "not supported", and why.
    unsupported: UNSUPPORTED,
  };
  let last: { id: string | undefined; json: string } | undefined;
  return () => {
    const id = readBootId(bootIdFile);
    if (!last || last.id !== id) last = { id, json: JSON.stringify(id ? { ...base, boot_id: id } : base) };
    return last.json;
  };
}

function readBootId(file: string): string | undefined {
  try {
    const id = readFileSync(file, "utf8").trim();
    return /^[\w-]{1,64}$/.test(id) ? id : undefined;
  } catch {
    return undefined;
  }
}

export function createComputerApp(options: ComputerAppOptions) {
  const { registry } = options;
  const log = options.log ?? silentLogger;
  const spread = options.spreadResult ?? true;
  const limit = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT;
  const status = statusBody(options.features, options.bootIdFile);

  const app = new Hono<ComputerEnv>();
  const policy = options.originPolicy ?? new OriginPolicy({ listenHost: "127.0.0.1" });
  app.use(originGuard(policy, (detail) => ({ detail }), refusalLogger(log)));
  app.get("/status", (c) => c.body(status(), 200, { "content-type": "application/json" }));
  if (options.websocket) app.get("/ws", options.websocket);
  // Share links (view-only, expiring): their routes are checked by their own token, before auth.
  const links = new ShareLinks();
  if (options.console) {
    app.route("/", pageRoutes("console"));
    app.route("/", sharedRoutes({ ...options.console, registry, links, page: () => pageHtml("console") }));
  }
  if (options.auth) app.use("*", options.auth);
  if (options.console) {
    app.route("/", consoleRoutes({ ...options.console, registry, features: options.features ?? [] }));
    app.route("/", shareRoutes({ links }));
  }

  if (options.recordings) app.route("/", recordingRoutes(options.recordings));

  app.get("/commands", (c) => c.json(commandCatalog(registry)));
  const { metrics } = options;
  if (metrics) {
    app.get("/metrics", async (c) => {
      const { contentType, text } = await metrics.scrape();
      return c.body(text, 200, { "content-type": contentType });
    });
  }
  const extraPaths = { ...(options.pty ? ptyOpenApiPaths : {}), ...mcpOpenApiPaths };
  app.get("/openapi.json", (c) => c.json(openApiDocument(registry, extraPaths)));

  app.route("/cmd", cmdRoutes({ registry, log, spread, bodyLimitBytes: limit }));
  app.route("/playwright_exec", playwrightRoutes({ registry, bodyLimitBytes: limit }));

  // cua's agent proxy runs a Python agent inside its server; Hangar embeds none.
  app.post("/responses", (c) =>
    c.json(
      {
        detail:
          "Not supported on this server: /responses runs cua's Python agent inside the server, and Hangar embeds " +
          "no agent. Run your agent loop outside and send it commands (/cmd, /ws, /mcp).",
      },
      501,
    ),
  );

  app.route("/files", fileRoutes({ bodyLimitBytes: limit, log, files: registry.files }));
  if (options.pty) app.route("/pty", ptyRoutes(options.pty, log, limit));
  app.route("/tunnel", tunnelRoutes(log));
  // The MCP SDK is loaded at the first /mcp request: it is a quarter of the server's idle memory.
  let mcp: Promise<(c: Context) => Promise<Response>> | undefined;
  app.all("/mcp", async (c) => {
    mcp ??= import("./transports/mcp/mcp-http.js").then((m) =>
      m.mcpHandler(registry, { log, bodyLimitBytes: limit }),
    );
    return (await mcp)(c);
  });

  app.notFound((c) => c.json({ detail: "Not Found" }, 404));
  app.onError((err, c) => {
    log.error({ err, path: c.req.path }, "request failed");
    return c.json({ detail: "Internal server error" }, 500);
  });
  return app;
}

/** Logs what the origin policy refused, as both gates (Hono's and Node's) do. */
function refusalLogger(log: Logger) {
  return (reason: string, headers: { origin?: string; host?: string }) =>
    log.warn({ ...headers, reason }, "request from a browser refused");
}

export interface ComputerListenerOptions
  extends Pick<ComputerAppOptions, "registry" | "log" | "spreadResult" | "bodyLimitBytes"> {
  originPolicy: OriginPolicy;
  /** Cloud mode: the keys `auth` checks on the app's routes. */
  authenticator?: Authenticator;
}

/**
 * The computer server's Node request listener: `POST /cmd` is answered here (cmd.ts), after the
 * same origin policy and cloud authentication the app applies to its routes; every other request
 * goes to `next`, the Hono adapter's listener of the app.
 */
export function computerListener(options: ComputerListenerOptions, next: RequestListener): RequestListener {
  const log = options.log ?? silentLogger;
  const cmd = cmdListener({
    registry: options.registry,
    log,
    spread: options.spreadResult ?? true,
    bodyLimitBytes: options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT,
    gate: nodeGate(options.originPolicy, options.authenticator, log),
  });
  return (req, res) => {
    if (!cmd(req, res)) next(req, res);
  };
}

const LET_THROUGH: GateVerdict = { ok: true };

/** `originGuard` then cloud authentication (`cloudAuth`), on Node's request. */
function nodeGate(policy: OriginPolicy, authenticator: Authenticator | undefined, log: Logger): NodeGate {
  const refused = refusalLogger(log);
  return (req: IncomingMessage) => {
    const get = (name: string) => nodeHeader(req, name);
    const asked = policyHeaders(get);
    const verdict = policy.check(asked);
    if (!verdict.ok) {
      refused(verdict.reason, asked);
      return { ok: false, status: 403, detail: verdict.reason };
    }
    const headers = verdict.cors && corsHeaders(verdict.cors);
    if (!authenticator) return headers ? { ok: true, headers } : LET_THROUGH;
    const address = req.socket.remoteAddress ?? "unknown";
    return authenticator.check(headerCredentials(get), address).then((result): GateVerdict => {
      if (result.ok) return headers ? { ok: true, headers } : LET_THROUGH;
      const retry: Record<string, string> = result.retryAfterSeconds
        ? { "retry-after": String(result.retryAfterSeconds) }
        : {};
      return { ok: false, status: result.status, detail: result.detail, headers: { ...headers, ...retry } };
    });
  };
}
