/**
 * `/mcp`: the registry's MCP server over streamable HTTP. A client that initializes gets a session
 * (`Mcp-Session-Id`), so that `notifications/cancelled` reaches the call it cancels; sessions idle
 * for `idleMs` are closed. A request without a session that is not `initialize` is served by an MCP
 * server of its own (stateless clients). Either way, closing the connection mid-call cancels the
 * command. Replies are JSON (no server-initiated streams). Mounted under the app's `auth` middleware.
 *
 * @example app.all("/mcp", mcpHandler(registry, { log, bodyLimitBytes }))
 */
import { randomUUID } from "node:crypto";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { isInitializeRequest, isJSONRPCRequest, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { Context } from "hono";
import { type Logger, silentLogger } from "../../../common/logger.js";
import type { CommandRegistry } from "../../core/registry.js";
import { readJsonBody } from "../../http/body.js";
import type { ComputerEnv } from "../../http/env.js";
import { createMcpServer } from "./mcp.js";

export interface McpHttpOptions {
  log?: Logger;
  /** Largest request body (default 64 MiB). */
  bodyLimitBytes?: number;
  /** A session without requests for this long is closed (default 30 min). */
  idleMs?: number;
  /** Sessions kept at once; the least recently used is closed to make room (default 64). */
  maxSessions?: number;
}

interface Session {
  readonly transport: WebStandardStreamableHTTPServerTransport;
  /** The HTTP request that carried each call in flight, by JSON-RPC id. */
  readonly calls: Map<RequestId, AbortSignal>;
  lastUsed: number;
  close(): Promise<void>;
}

const rpcError = (code: number, message: string) => ({ jsonrpc: "2.0", error: { code, message }, id: null });

export function mcpHandler(registry: CommandRegistry, options: McpHttpOptions = {}) {
  const log = options.log ?? silentLogger;
  const limit = options.bodyLimitBytes ?? 64 * 1024 * 1024;
  const idleMs = options.idleMs ?? 30 * 60_000;
  const maxSessions = options.maxSessions ?? 64;
  const sessions = new Map<string, Session>();

  const reaper = setInterval(
    () => {
      const now = Date.now();
      for (const session of sessions.values()) if (now - session.lastUsed >= idleMs) void session.close();
    },
    Math.min(60_000, Math.max(50, idleMs / 4)),
  );
  reaper.unref();

  /** A transport and MCP server; `sessionId` makes it a session, `undefined` a one-request server. */
  const open = async (sessionId: (() => string) | undefined): Promise<Session> => {
    const calls = new Map<RequestId, AbortSignal>();
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: sessionId,
      enableJsonResponse: true,
      onsessioninitialized: (id) => {
        sessions.set(id, session);
      },
      onsessionclosed: (id) => {
        sessions.delete(id);
      },
    });
    const server = createMcpServer(registry, log, (id) => calls.get(id));
    const session: Session = {
      transport,
      calls,
      lastUsed: Date.now(),
      close: async () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
        await server.close().catch(() => undefined);
      },
    };
    await server.connect(transport);
    return session;
  };

  /** Runs one HTTP request through a session's transport, with its calls tied to the request. */
  const handle = async (session: Session, req: Request, body: unknown) => {
    session.lastUsed = Date.now();
    const ids = (Array.isArray(body) ? body : [body]).filter(isJSONRPCRequest).map((m) => m.id);
    for (const id of ids) session.calls.set(id, req.signal);
    try {
      return await session.transport.handleRequest(req, { parsedBody: body });
    } finally {
      for (const id of ids) session.calls.delete(id);
      session.lastUsed = Date.now();
    }
  };

  return async (c: Context<ComputerEnv>) => {
    let body: unknown;
    if (c.req.method === "POST") {
      // Counted while it streams in: a body over the limit is refused before it is buffered.
      const read = await readJsonBody(c.env.incoming, limit);
      if (!read.ok) {
        return c.json(rpcError(read.status === 413 ? -32600 : -32700, read.detail), read.status);
      }
      body = read.value;
    }

    const sessionId = c.req.header("mcp-session-id");
    if (sessionId) {
      const session = sessions.get(sessionId);
      if (!session) {
        return c.json(rpcError(-32001, "Session not found: it was closed or expired; initialize again"), 404);
      }
      return handle(session, c.req.raw, body);
    }

    if (isInitializeRequest(body)) {
      if (sessions.size >= maxSessions) {
        const oldest = [...sessions.values()].sort((a, b) => a.lastUsed - b.lastUsed)[0];
        await oldest?.close();
      }
      return handle(await open(randomUUID), c.req.raw, body);
    }

    const oneShot = await open(undefined);
    try {
      return await handle(oneShot, c.req.raw, body);
    } finally {
      void oneShot.close();
    }
  };
}
