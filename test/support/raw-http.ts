/**
 * Requests with headers that `fetch` will not send as given (`Host`, `Origin`, `Sec-Fetch-*`), as a
 * browser or a DNS-rebinding page would, and WebSocket upgrades with an `Origin`.
 */
import { request } from "node:http";
import WebSocket from "ws";

export interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

export function rawRequest(
  url: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<RawReply> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        method,
        path,
        headers: { ...headers, ...(body === undefined ? {} : { "content-length": Buffer.byteLength(body) }) },
        agent: false,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => {
          text += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** Opens a WebSocket with these headers: `"open"`, or the HTTP status the upgrade was refused with. */
export function tryUpgrade(url: string, headers: Record<string, string>): Promise<"open" | number> {
  return new Promise((resolve, reject) => {
    const { origin, ...rest } = headers;
    const ws = new WebSocket(url, { origin, headers: rest });
    ws.once("open", () => {
      ws.close();
      resolve("open");
    });
    ws.once("unexpected-response", (_req, res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
      ws.terminate();
    });
    ws.once("error", reject);
  });
}
