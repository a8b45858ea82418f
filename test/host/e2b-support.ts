/**
 * What the E2B tests share: the key, the SDK's connection options for a host's E2B listener,
 * requests to a sandbox's per-port name (`{port}-{id}.localhost:<port>`) sent to 127.0.0.1 with
 * that name in `Host` (no DNS here), and a small HTTP + WebSocket server started inside a sandbox's
 * desktop through its computer server (what an agent's dev server would be).
 */
import type { LookupFunction } from "node:net";
import WebSocket from "ws";
import { type RawReply, rawRequest } from "../support/raw-http.js";
import { desktopCommand } from "./desktop-client.js";

export const E2B_KEY = "e2b-test-key-0123456789abcdef";
/** The desktop template built on the test image (scripts/e2b-desktop-image.sh). */
export const TEST_DESKTOP_TEMPLATE =
  process.env.HANGAR_TEST_DESKTOP_TEMPLATE ?? "localhost/hangar-desktop:test";

/** The options E2B's SDK takes to use this listener for its API and for envd. */
export function sdkOptions(e2bUrl: string, apiKey = E2B_KEY) {
  return { apiKey, apiUrl: e2bUrl, sandboxUrl: e2bUrl, requestTimeoutMs: 120_000 };
}

/** Every name resolves to loopback, as `*.localhost` does in browsers. */
export const loopbackLookup = ((
  _host: string,
  options: { all?: boolean },
  done: (...args: unknown[]) => void,
) => {
  if (options?.all) done(null, [{ address: "127.0.0.1", family: 4 }]);
  else done(null, "127.0.0.1", 4);
}) as unknown as LookupFunction;

/** A request to `http://{name}/{path}` sent to 127.0.0.1 (the name's port) with the name in `Host`. */
export function viaLoopback(
  hostWithPort: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<RawReply> {
  const port = hostWithPort.split(":").at(-1);
  return rawRequest(`http://127.0.0.1:${port}`, method, path, { host: hostWithPort, ...headers }, body);
}

/** Opens a WebSocket to `url` (its name resolved to loopback); `"open"` with the socket, or the refusal's status. */
export function openSocket(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ ws: WebSocket } | { status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const { origin, ...rest } = headers;
    const ws = new WebSocket(url, { origin, headers: rest, lookup: loopbackLookup });
    ws.once("open", () => resolve({ ws }));
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        body += chunk;
      });
      res.on("end", () => {
        resolve({ status: res.statusCode ?? 0, body });
        ws.terminate();
      });
    });
    ws.once("error", reject);
  });
}

/**
 * The service started in a sandbox on `port`: `GET /` a page that echoes through a WebSocket of
 * its own address, `GET /headers` the request's headers, `GET /stream` one line at once and the
 * rest once `GET /release` is asked, and `/echo` a WebSocket that sends every message back.
 */
const SERVICE = `
const http = require("http");
const { WebSocketServer } = require("/opt/hangar/node_modules/ws");
let release = [];
const page = '<!doctype html><title>waiting</title><script>' +
  'const ws = new WebSocket("ws://" + location.host + "/echo");' +
  'ws.onopen = () => ws.send("echoed through the sandbox");' +
  'ws.onmessage = (e) => { document.title = e.data; };' +
  'ws.onclose = (e) => { if (document.title === "waiting") document.title = "closed " + e.code; };' +
  '</script>';
const server = http.createServer((req, res) => {
  req.socket.answered = true;
  if (req.url === "/headers") return res.end(JSON.stringify(req.headers));
  if (req.url === "/stream") {
    res.writeHead(200, { "content-type": "text/plain" });
    res.write("first line\\n");
    release.push(() => res.end("last line\\n"));
    return;
  }
  if (req.url === "/release") { release.splice(0).forEach((f) => f()); return res.end("released"); }
  res.writeHead(200, { "content-type": "text/html" });
  res.end(page);
});
// Like many servers, it takes an upgrade only as the first request of a connection.
const wss = new WebSocketServer({ noServer: true });
server.on("upgrade", (req, socket, head) => {
  if (socket.answered || req.url !== "/echo") return socket.destroy();
  wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req));
});
wss.on("connection", (ws) => ws.on("message", (data, binary) => ws.send(data, { binary })));
server.listen(Number(process.argv[2]), "0.0.0.0", () => console.log("listening"));
`;

/** Starts the test service in the desktop on `port` and waits until it answers there. */
export async function startServiceIn(
  desktop: { name: string; computerServerUrl: string | null; apiKey?: string },
  port: number,
) {
  const script = Buffer.from(SERVICE).toString("base64");
  const started = await desktopCommand(desktop, "run_command", {
    command:
      `echo ${script} | base64 -d > /tmp/e2b-test-service.js && ` +
      `(nohup node /tmp/e2b-test-service.js ${port} > /tmp/e2b-test-service.log 2>&1 &) && ` +
      // Waits for the service's word that it listens (or its failure), a tenth of a second at a time.
      "for i in $(seq 150); do grep -q listening /tmp/e2b-test-service.log 2>/dev/null && exit 0; sleep 0.1; done; " +
      "cat /tmp/e2b-test-service.log; exit 1",
  });
  if (!started.result.success || started.result.content?.return_code !== 0) {
    throw new Error(`the test service did not start: ${JSON.stringify(started.result)}`);
  }
}
