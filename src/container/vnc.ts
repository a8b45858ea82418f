/**
 * VNC for people who want to watch the container's desktop: x11vnc on loopback with a password,
 * and in front of it a small web server of Hangar's own (no Python websockify): noVNC's pages from
 * Debian's novnc package (`/` is the viewer) and a WebSocket relay to x11vnc. It answers over TLS
 * when given a certificate, refuses pages of other origins and foreign Host headers like the
 * computer server, and closes the VNC connection when the browser goes.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { WebSocketServer } from "ws";
import { listening } from "../common/listen.js";
import { nodeHeader, OriginPolicy, policyHeaders } from "../common/origin-policy.js";
import { relaySocket } from "../common/socket-relay.js";
import type { VncSettings } from "./settings.js";

export const NOVNC_WEB_ROOT = "/usr/share/novnc";
const VIEWER = "vnc.html";
const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".ogg": "audio/ogg",
  ".mp3": "audio/mpeg",
  ".woff": "font/woff",
  ".woff2": "font/woff2",
};

export interface VncServers {
  stop(): Promise<void>;
}

export interface WebOptions {
  host: string;
  /** PEM certificate and key: the viewer is served over HTTPS and WSS. */
  tls?: { cert: Buffer; key: Buffer };
  webRoot?: string;
}

export async function startVnc(
  settings: VncSettings,
  display: Record<string, string>,
  web: WebOptions,
): Promise<VncServers> {
  const env = { ...process.env, ...display };
  const dir = await mkdtemp(join(tmpdir(), "hangar-vnc-"));
  // x11vnc reads the password from the file and deletes it (`rm:`), so it never shows in `ps`.
  const passwordFile = join(dir, "password");
  await writeFile(passwordFile, `${settings.password}\n`, { mode: 0o600 });
  let x11vnc: ChildProcess | undefined;
  let viewer: Server | undefined;
  const stop = async () => {
    if (viewer) await closeServer(viewer);
    if (x11vnc) await terminate(x11vnc);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    x11vnc = spawn(
      "x11vnc",
      [
        "-display",
        display.DISPLAY,
        "-rfbport",
        String(settings.port),
        "-localhost",
        "-forever",
        "-shared",
        // No remote control through X properties (any program on the display could send it) and
        // no external commands: x11vnc runs as the server's user, the agent's programs may not.
        "-noremote",
        "-nocmds",
      ].concat(["-passwdfile", `rm:${passwordFile}`, "-quiet", "-nossl", "-noipv6"]),
      { env, stdio: "ignore" },
    );
    await waitForPort(settings.port, "x11vnc", x11vnc);
    viewer = await startViewer(settings, web);
    return { stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The noVNC pages and the WebSocket relay to x11vnc on `settings.webPort`. */
async function startViewer(settings: VncSettings, web: WebOptions): Promise<Server> {
  const root = web.webRoot ?? NOVNC_WEB_ROOT;
  const policy = new OriginPolicy({ listenHost: web.host });
  const refused = (req: IncomingMessage) => {
    const verdict = policy.check(policyHeaders((name) => nodeHeader(req, name)));
    return verdict.ok ? undefined : verdict.reason;
  };
  const pages = (req: IncomingMessage, res: ServerResponse) => {
    res.on("error", () => undefined);
    const reason = refused(req);
    if (reason) return void res.writeHead(403, { "content-type": "text/plain" }).end(`${reason}\n`);
    servePage(root, req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    });
  };
  const server = web.tls
    ? createHttpsServer({ cert: web.tls.cert, key: web.tls.key }, pages)
    : createHttpServer(pages);
  server.on("clientError", (_err, socket) => socket.destroy());
  const sockets = new WebSocketServer({ noServer: true, maxPayload: 16 * 1024 * 1024 });
  server.on("upgrade", (req, socket, head) => {
    socket.on("error", () => socket.destroy());
    const reason = refused(req);
    if (reason) {
      socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\n${reason}\n`);
      return;
    }
    sockets.handleUpgrade(req, socket, head, (ws) =>
      relaySocket(ws, connect({ host: "127.0.0.1", port: settings.port })),
    );
  });
  // events.once for "listening" rejects on "error" with the bare error: listening() says where.
  await listening(server, {
    host: web.host,
    tls: Boolean(web.tls),
    listen: () => server.listen(settings.webPort, web.host),
  }).catch((err: Error) => {
    throw new Error(`the noVNC viewer cannot listen on ${web.host}:${settings.webPort}: ${err.message}`);
  });
  server.on("error", () => undefined);
  return server;
}

async function servePage(root: string, req: IncomingMessage, res: ServerResponse) {
  if (req.method !== "GET" && req.method !== "HEAD") {
    return void res.writeHead(405, { allow: "GET, HEAD" }).end();
  }
  let path: string;
  try {
    path = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
  } catch {
    return void res.writeHead(400).end();
  }
  const relative = normalize(path === "/" ? VIEWER : path)
    .replace(/^(\.\.(\/|$))+/, "")
    .replace(/^\/+/, "");
  if (relative.includes("\0") || relative.split("/").includes("..")) return void res.writeHead(404).end();
  const body = await readFile(join(root, relative)).catch(() => undefined);
  if (!body) return void res.writeHead(404, { "content-type": "text/plain" }).end("Not found\n");
  res.writeHead(200, {
    "content-type": TYPES[extname(relative)] ?? "application/octet-stream",
    "content-length": body.length,
    "x-content-type-options": "nosniff",
  });
  res.end(req.method === "HEAD" ? undefined : body);
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

async function waitForPort(port: number, name: string, child: ChildProcess, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  let failure: Error | undefined;
  child.once("error", (err) => {
    failure = new Error(`${name} could not be started: ${err.message} (is it installed?)`);
  });
  while (Date.now() < deadline) {
    if (failure) throw failure;
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode}`);
    if (await answers(port)) return;
    await sleep(50);
  }
  throw new Error(`${name} did not listen on port ${port} within ${timeoutMs} ms`);
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

async function terminate(child: ChildProcess) {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
  await exited.catch(() => undefined);
  clearTimeout(timer);
}
