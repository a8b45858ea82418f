/**
 * The WebSocket server behind `/ws` and `/pty/{pid}/ws`, created at the first upgrade: `ws` (and the
 * TLS, zlib and HTTPS modules it pulls in) stays out of memory for servers that only see `/cmd`.
 * It has the shape @hono/node-server asks of a WebSocket server (`WebSocketServerLike`).
 */
import { EventEmitter } from "node:events";
import type { IncomingMessage } from "node:http";
import { createRequire } from "node:module";
import type { Duplex } from "node:stream";
import type { HttpBindings } from "@hono/node-server";
import type { Context } from "hono";
import type * as Ws from "ws";

/**
 * A 400 for a request that says `Upgrade: websocket` without `Connection: Upgrade`: Node serves it as
 * an ordinary request, which the WebSocket routes cannot answer. Undefined for any other request.
 */
export function refuseHalfUpgrade(c: Context<{ Bindings: HttpBindings }>): Response | undefined {
  if (c.req.header("upgrade")?.toLowerCase() !== "websocket") return undefined;
  if (/(^|,)\s*upgrade\s*(,|$)/i.test(c.req.header("connection") ?? "")) return undefined;
  return c.json({ detail: "WebSocket upgrade needs the header Connection: Upgrade" }, 400);
}

export class LazyWebSocketServer extends EventEmitter {
  readonly options = { noServer: true } as const;
  private server: Ws.WebSocketServer | undefined;

  /** `maxPayload`: the largest message in bytes; a larger one closes the socket with 1009. */
  constructor(private readonly maxPayload: number) {
    super();
  }

  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer, done: (ws: Ws.WebSocket) => void) {
    this.loaded().handleUpgrade(request, socket, head, done);
  }

  /** Closes every open socket at once (the server is shutting down). */
  terminateAll() {
    for (const socket of this.server?.clients ?? []) socket.terminate();
  }

  close() {
    this.server?.close();
  }

  private loaded(): Ws.WebSocketServer {
    if (!this.server) {
      const { WebSocketServer } = createRequire(import.meta.url)("ws") as typeof Ws;
      this.server = new WebSocketServer({ noServer: true, maxPayload: this.maxPayload });
      // node-server adds the response's headers to the handshake through this event.
      this.server.on("headers", (headers, request) => this.emit("headers", headers, request));
    }
    return this.server;
  }
}
