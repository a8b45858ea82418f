/**
 * A Hono app on Node's HTTP server, with hono's Node adapter (@hono/node-server) loaded at the first
 * request that needs it. The adapter takes Node's web `Request`, `Response` and `Headers` when it is
 * loaded (it extends them), and Node then loads undici, and with it node:http2, node:tls and
 * node:zlib: 40 ms and 4 MB of resident memory in a fresh Node, before any client asked for
 * anything. Requests that the server's `front` listener answers by itself (`/status`, which
 * readiness probes and warm pools poll, and `/cmd`) never load it; the first other request waits
 * for it once.
 */
import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { upgradeWebSocket as adapterUpgradeWebSocket, createAdaptorServer } from "@hono/node-server";
import type { Context, MiddlewareHandler, Next } from "hono";
import { loadOnce } from "./load-once.js";

type AdaptorOptions = Parameters<typeof createAdaptorServer>[0];
type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

export interface LazyServerOptions {
  fetch: AdaptorOptions["fetch"];
  /** The host name of request URLs when a request has no `Host` (as the adapter's). */
  hostname?: string;
  /** The WebSocket server the adapter hands upgrades to (`/ws`, the PTY and live-view sockets). */
  websocket?: AdaptorOptions["websocket"];
  /** `node:https`' createServer and its options for TLS; node:http's by default. */
  createServer?: (options: object, listener: RequestListener) => Server;
  serverOptions?: object;
  /**
   * The server's listener, given the adapter's (which loads the adapter at its first request): it
   * answers what it can by itself and passes the rest on. Default: the adapter's.
   */
  front?: (adapter: RequestListener) => RequestListener;
}

/** The server, not yet listening (as the adapter's `createAdaptorServer`). */
export function createLazyAdaptorServer(options: LazyServerOptions): Server {
  let listener: RequestListener | undefined;
  // The adapter's handler of upgrades listens here; the server's upgrades are passed on to it.
  const upgrades = new EventEmitter();
  const adapterLoad = loadOnce(() =>
    import("@hono/node-server").then(({ createAdaptorServer }) => {
      createAdaptorServer({
        fetch: options.fetch,
        hostname: options.hostname,
        websocket: options.websocket,
        // Its listener and its upgrade handler without a server of its own.
        createServer: (_: object, requestListener: RequestListener) => {
          listener = requestListener;
          return upgrades;
        },
      } as unknown as AdaptorOptions);
      return listener!;
    }),
  );
  const load = () => adapterLoad.get();
  const adapter: RequestListener = (req, res) => {
    if (listener) return listener(req, res);
    load().then(
      (loaded) => loaded(req, res),
      (err) => res.destroy(err),
    );
  };
  const server = (options.createServer ?? createServer)(
    options.serverOptions ?? {},
    options.front ? options.front(adapter) : adapter,
  );
  // As the adapter does: an upgrade listener only with a WebSocket server.
  if (options.websocket) {
    server.on("upgrade", (req, socket, head) => {
      load().then(
        () => upgrades.emit("upgrade", req, socket, head),
        () => socket.destroy(),
      );
    });
  }
  return server;
}

/**
 * The adapter's `upgradeWebSocket`, for routes made before it is loaded: the adapter is loaded once
 * a request reaches such a route (it came through the adapter).
 */
export const upgradeWebSocket = ((...args: unknown[]) => {
  let handler: MiddlewareHandler | undefined;
  return async (c: Context, next: Next) => {
    handler ??= (
      (await import("@hono/node-server")).upgradeWebSocket as (...a: unknown[]) => MiddlewareHandler
    )(...args);
    return handler(c, next);
  };
}) as unknown as typeof adapterUpgradeWebSocket;
