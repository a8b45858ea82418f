/**
 * The computer server's HTTP surface: `/status`, `/commands`, `/openapi.json` and `POST /cmd`.
 * Transports only parse, frame and write; every command goes through `registry.run()`.
 */
import type { HttpBindings } from "@hono/node-server";
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { CommandError } from "../common/errors.js";
import { type Logger, silentLogger } from "../common/logger.js";
import { OriginPolicy, originGuard } from "../common/origin-policy.js";
import { formatBytes } from "../common/sizes.js";
import { pageRoutes } from "../common/web-page.js";
import { BodyTooLargeError, readBody } from "./body.js";
import { preparedHeaders, sentByHand } from "./by-hand.js";
import { commandCatalog, openApiDocument } from "./catalog.js";
import { type ConsoleOptions, consoleRoutes } from "./console-routes.js";
import { fileRoutes } from "./files-http.js";
import { mcpOpenApiPaths } from "./mcp-openapi.js";
import { cmdEventBytes, wsEnvelope } from "./outcome.js";
import { ptyRoutes } from "./pty.js";
import { ptyOpenApiPaths } from "./pty-openapi.js";
import type { PtySessions } from "./pty-sessions.js";
import type { CommandRegistry } from "./registry.js";

export type ComputerEnv = { Bindings: HttpBindings };

export interface ComputerAppOptions {
  registry: CommandRegistry;
  log?: Logger;
  /** Copy a result's fields beside `content` on `/cmd` (cua clients need it). Default on. */
  spreadResult?: boolean;
  /** Largest request body in bytes (default 64 MiB). */
  bodyLimitBytes?: number;
  /** Names reported in `/status` `features`. */
  features?: string[];
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
}

export const DEFAULT_BODY_LIMIT = 64 * 1024 * 1024;
/** `/playwright_exec` command `x` is the registry's `browser_x`. */
const BROWSER_PREFIX = "browser_";
const UNSUPPORTED = ["diorama_cmd", "/responses"];
/** A streaming client this far behind (bytes not yet sent) is treated as gone: its command is cancelled. */
const STREAM_BACKLOG_LIMIT = 64 * 1024 * 1024;

export function osType(): "linux" | "darwin" | "windows" {
  if (process.platform === "win32") return "windows";
  if (process.platform === "darwin") return "darwin";
  return "linux";
}

export function createComputerApp(options: ComputerAppOptions) {
  const { registry } = options;
  const log = options.log ?? silentLogger;
  const spread = options.spreadResult ?? true;
  const limit = options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT;
  const status = JSON.stringify({
    status: "ok",
    os_type: osType(),
    features: options.features ?? [],
    // What cua's server has and this one answers with "not supported", and why.
    unsupported: UNSUPPORTED,
  });

  const app = new Hono<ComputerEnv>();
  const policy = options.originPolicy ?? new OriginPolicy({ listenHost: "127.0.0.1" });
  app.use(
    originGuard(
      policy,
      (detail) => ({ detail }),
      (reason, headers) => log.warn({ ...headers, reason }, "request from a browser refused"),
    ),
  );
  app.get("/status", (c) => c.body(status, 200, { "content-type": "application/json" }));
  if (options.websocket) app.get("/ws", options.websocket);
  if (options.console) app.route("/", pageRoutes("console"));
  if (options.auth) app.use("*", options.auth);
  if (options.console) {
    app.route("/", consoleRoutes({ ...options.console, registry, features: options.features ?? [] }));
  }

  app.get("/commands", (c) => c.json(commandCatalog(registry)));
  const extraPaths = { ...(options.pty ? ptyOpenApiPaths : {}), ...mcpOpenApiPaths };
  app.get("/openapi.json", (c) => c.json(openApiDocument(registry, extraPaths)));

  app.post("/cmd", async (c) => {
    const frame = await readCommandFrame(c, limit);
    if (frame instanceof Response) return frame;
    if (!registry.resolve(frame.command))
      return c.json({ detail: registry.unknownCommandMessage(frame.command) }, 400);
    return runAsEventStream(c, registry, frame.command, frame.params, spread, log);
  });

  // cua's browser endpoint: its commands are the registry's `browser_*` ones, answered in cua's shape.
  app.post("/playwright_exec", async (c) => {
    const frame = await readCommandFrame(c, limit);
    if (frame instanceof Response) return frame;
    const name = `${BROWSER_PREFIX}${frame.command}`;
    if (!registry.resolve(name)) {
      const known = registry.commands
        .map((d) => d.name)
        .filter((n) => n.startsWith(BROWSER_PREFIX))
        .map((n) => n.slice(BROWSER_PREFIX.length));
      return c.json(
        { detail: `Unknown browser command: ${frame.command.slice(0, 80)} (known: ${known.join(", ")})` },
        400,
      );
    }
    const gone = new AbortController();
    c.env.outgoing.once("close", () => gone.abort());
    const outcome = await registry.run(name, frame.params, { signal: gone.signal, transport: "playwright" });
    return c.json(wsEnvelope(outcome));
  });

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

  app.route("/files", fileRoutes({ bodyLimitBytes: limit, log }));
  if (options.pty) app.route("/pty", ptyRoutes(options.pty, log));
  // The MCP SDK is loaded at the first /mcp request: it is a quarter of the server's idle memory.
  let mcp: Promise<(c: Context) => Promise<Response>> | undefined;
  app.all("/mcp", async (c) => {
    mcp ??= import("./mcp-http.js").then((m) => m.mcpHandler(registry, { log, bodyLimitBytes: limit }));
    return (await mcp)(c);
  });

  app.notFound((c) => c.json({ detail: "Not Found" }, 404));
  app.onError((err, c) => {
    log.error({ err, path: c.req.path }, "request failed");
    return c.json({ detail: "Internal server error" }, 500);
  });
  return app;
}

/**
 * Writes the headers at once, then one `data:` event per intermediate result and one for the final
 * outcome. A client that goes away aborts the command.
 */
async function runAsEventStream(
  c: Context<ComputerEnv>,
  registry: CommandRegistry,
  command: string,
  params: unknown,
  spread: boolean,
  log: Logger,
) {
  const res = c.env.outgoing;
  const headers: Record<string, string> = {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
  };
  Object.assign(headers, preparedHeaders(c));
  sentByHand(c);
  res.writeHead(200, headers);
  res.flushHeaders();

  const gone = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) gone.abort();
  };
  res.once("close", onClose);
  const write = (event: unknown) => {
    if (res.writableEnded || res.destroyed) return;
    res.write(`data: ${JSON.stringify(event)}\n\n`);
    if (res.writableLength > STREAM_BACKLOG_LIMIT && !gone.signal.aborted) {
      gone.abort(new CommandError("cancelled", "Command cancelled: the client stopped reading its output"));
    }
  };
  try {
    const outcome = await registry.run(command, params, {
      signal: gone.signal,
      // The console page marks its own commands, so the timeline tells a person's from the agent's.
      // Node's parsed headers: c.req.header() would build a whole Headers object per request.
      transport: c.env.incoming.headers["x-hangar-client"] === "console" ? "console" : "http",
      emit: (content) => write({ success: true, content }),
    });
    if (!res.destroyed) {
      res.cork();
      // A text piece is base64 (see EventPiece); the encoding does not apply to Buffers.
      for (const part of cmdEventBytes(outcome, spread)) res.write(part, "latin1");
      res.end();
      res.uncork();
    }
  } catch (err) {
    log.error({ err, command }, "writing the reply failed");
    res.destroy();
  } finally {
    res.off("close", onClose);
  }
  return sentByHand(c);
}

/**
 * The `{"command", "params"}` body of `/cmd` and `/playwright_exec`, or the 4xx reply that says what is
 * wrong with it (not JSON, not an object, no command, too large).
 */
async function readCommandFrame(
  c: Context<ComputerEnv>,
  limit: number,
): Promise<{ command: string; params: unknown } | Response> {
  let body: unknown;
  try {
    body = JSON.parse((await readBody(c.env.incoming, limit)).toString("utf8"));
  } catch (err) {
    if (err instanceof BodyTooLargeError) {
      c.header("connection", "close");
      return c.json(
        { detail: `Request body too large: the limit is ${formatBytes(limit)} (--body-limit)` },
        413,
      );
    }
    return c.json({ detail: `Invalid JSON body: ${(err as Error).message}` }, 400);
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return c.json({ detail: 'Invalid JSON body: expected an object {"command": ..., "params": {...}}' }, 400);
  }
  const { command, params } = body as { command?: unknown; params?: unknown };
  if (typeof command !== "string" || command.length === 0)
    return c.json({ detail: "Command is required" }, 400);
  return { command, params };
}
