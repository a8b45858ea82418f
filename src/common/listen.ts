/**
 * Listening and closing, the same for every server of both programs (the computer server, its
 * OSWorld listener, the host service): wait for `listening` or for the error that prevents it
 * (`EADDRINUSE`…), the URL to show (an IPv6 host in brackets), and a close that also ends the
 * connections kept alive, which `close()` alone would wait for.
 */
import type { Server as HttpServer } from "node:http";
import { type AddressInfo, createServer, type Server } from "node:net";

export interface Listening {
  port: number;
  url: string;
}

/** Resolves once `server` listens; `listen` starts it, for a server not started by its maker. */
export async function listening(
  server: Server,
  options: { host: string; tls: boolean; listen?: () => void },
): Promise<Listening> {
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
    options.listen?.();
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(":") ? `[${options.host}]` : options.host;
  return { port, url: `${options.tls ? "https" : "http"}://${host}:${port}` };
}

/** Stops listening and closes every connection, idle keep-alive ones included. */
export function closeServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  if ("closeAllConnections" in server) (server as HttpServer).closeAllConnections();
  return closed;
}

/** Whether this process could listen on `address:port` now (tried, and closed again at once). */
export function canListen(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen({ host: address, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** A port free on 127.0.0.1 now (the kernel's pick; another program may take it before it is used). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: 0, exclusive: true }, () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
