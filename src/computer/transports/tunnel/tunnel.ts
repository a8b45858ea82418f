/**
 * `GET /tunnel/{port}` (a WebSocket): a TCP connection to that port on the desktop's loopback,
 * carried byte for byte in binary messages. The host service reaches every service inside a
 * desktop this way (E2B's envd on 49983, noVNC on 6080, a dev server an agent started) through
 * the one port it already reaches, whatever runs the desktop (a container's published port, a
 * Pod's relay, a VM's forwarded port).
 *
 * The connection is made before the upgrade is accepted: a port where nothing listens is a plain
 * 502 that says so, never a socket that opens and closes at once. Only loopback is dialled, and
 * the route sits behind the same origin policy and keys as `/cmd`: whoever may run commands here
 * may reach these ports anyway.
 */
import { connect, type Socket } from "node:net";
import { Hono } from "hono";
import type { WebSocket } from "ws";
import { upgradeWebSocket } from "../../../common/lazy-node-server.js";
import type { Logger } from "../../../common/logger.js";
import { relaySocket } from "../../../common/socket-relay.js";
import { refuseHalfUpgrade } from "../../../common/ws-server.js";
import type { ComputerEnv } from "../../http/env.js";

/** How long connecting to the port may take (loopback answers at once, or refuses). */
const CONNECT_TIMEOUT_MS = 5000;

export function tunnelRoutes(log: Logger) {
  const routes = new Hono<ComputerEnv>();
  routes.get("/:port", async (c, next) => {
    const half = refuseHalfUpgrade(c);
    if (half) return half;
    if (c.req.header("upgrade")?.toLowerCase() !== "websocket") {
      return c.json({ detail: "GET /tunnel/{port} is a WebSocket: send Upgrade: websocket" }, 400);
    }
    const text = c.req.param("port");
    const port = /^\d{1,5}$/.test(text) ? Number(text) : 0;
    if (port < 1 || port > 65535) {
      return c.json({ detail: `Invalid port '${text}': expected a number from 1 to 65535` }, 400);
    }
    let tcp: Socket;
    try {
      tcp = await connectLoopback(port);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      const why = code === "ECONNREFUSED" ? "nothing listens there" : (err as Error).message;
      return c.json({ detail: `Cannot connect to port ${port} in the desktop: ${why}` }, 502);
    }
    // The client may go before its upgrade completes: the connection goes with it.
    c.env.incoming.socket.once("close", () => tcp.destroy());
    const upgrade = upgradeWebSocket(() => ({
      onOpen: (_event, ws) =>
        relaySocket(ws.raw as WebSocket, tcp, {
          closedReason: `port ${port} closed the connection`,
          onTcpError: (err) => log.debug({ err, port }, "tunnel: the connection failed"),
        }),
      onClose: () => tcp.destroy(),
      onError: () => tcp.destroy(),
    }));
    return upgrade(c, next);
  });
  return routes;
}

/** A connected socket to the port on 127.0.0.1, else on ::1 (a server bound to `localhost` there). */
async function connectLoopback(port: number): Promise<Socket> {
  try {
    return await connectTo("127.0.0.1", port);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ECONNREFUSED") throw err;
    return await connectTo("::1", port).catch(() => Promise.reject(err));
  }
}

function connectTo(host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, timeout: CONNECT_TIMEOUT_MS });
    const fail = (err: Error) => {
      socket.destroy();
      reject(err);
    };
    socket.once("error", fail);
    socket.once("timeout", () => fail(new Error(`no answer within ${CONNECT_TIMEOUT_MS} ms`)));
    socket.once("connect", () => {
      socket.off("error", fail);
      socket.setTimeout(0);
      resolve(socket);
    });
  });
}
