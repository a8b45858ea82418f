/**
 * Clients of an egress gate as a desktop's programs use it: HTTPS through `CONNECT`, HTTPS by name
 * (TLS with SNI straight to the gate), HTTP through the proxy, DNS.
 */
import { promises as dns } from "node:dns";
import http from "node:http";
import type net from "node:net";
import tls from "node:tls";

export interface Reply {
  status: number;
  body: string;
}

/** A GET over an open TLS socket, HTTP/1.1, `Connection: close`. */
function getOver(
  socket: tls.TLSSocket,
  host: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      createConnection: () => socket,
      host,
      path,
      headers: { connection: "close", ...headers },
    });
    req.on("response", (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (c) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

function tlsOver(socket: net.Socket | undefined, options: tls.ConnectionOptions): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const secure = tls.connect({ ...options, ...(socket && { socket }) }, () => resolve(secure));
    secure.once("error", reject);
  });
}

/** `CONNECT host:port` through the proxy: the proxy's answer, and the socket when it is 200. */
export function connectThrough(
  proxy: { host: string; port: number },
  target: string,
): Promise<{ status: number; body: string; socket?: net.Socket }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: proxy.host, port: proxy.port, method: "CONNECT", path: target });
    req.on("connect", (res, socket, head: Buffer) => {
      if (res.statusCode === 200) {
        if (head.length > 0) socket.unshift(head);
        return resolve({ status: 200, body: "", socket });
      }
      let body = head.toString();
      socket.setEncoding("utf8").on("data", (c) => {
        body += c;
      });
      socket.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** HTTPS GET through the proxy (`CONNECT`), the server's certificate checked against `ca`. */
export async function httpsViaProxy(
  proxy: { host: string; port: number },
  name: string,
  path: string,
  ca: string,
  headers?: Record<string, string>,
): Promise<Reply> {
  const tunnel = await connectThrough(proxy, `${name}:443`);
  if (!tunnel.socket) return { status: tunnel.status, body: tunnel.body };
  const secure = await tlsOver(tunnel.socket, { servername: name, ca });
  return getOver(secure, name, path, headers);
}

/** HTTPS GET to the gate's TLS port by name (SNI), as a program that resolved the name to the gate does. */
export async function httpsByName(
  gate: { host: string; port: number },
  name: string,
  path: string,
  ca: string,
): Promise<Reply> {
  const secure = await tlsOver(undefined, { host: gate.host, port: gate.port, servername: name, ca });
  return getOver(secure, name, path);
}

/** HTTP GET through the proxy (an absolute URL). */
export function httpViaProxy(proxy: { host: string; port: number }, url: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      { host: proxy.host, port: proxy.port, path: url, headers: { host: new URL(url).host } },
      (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (c) => {
          body += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
  });
}

/** The A records a DNS server gives for a name, or the error's code (`ENOTFOUND`, `EREFUSED`). */
export async function lookupAt(server: string, name: string): Promise<string[] | string> {
  const resolver = new dns.Resolver({ timeout: 2000, tries: 1 });
  resolver.setServers([server]);
  return resolver.resolve4(name).catch((err: NodeJS.ErrnoException) => err.code ?? "error");
}
