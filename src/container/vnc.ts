/**
 * VNC for people who want to watch the container's desktop: x11vnc on loopback with a password,
 * started when a viewer comes, and in front of it a small web server of Hangar's own (no Python
 * websockify): noVNC's pages from Debian's novnc package (`/` is the viewer) and a WebSocket relay to
 * x11vnc, beside a plain TCP relay on the VNC port. It answers over TLS
 * when given a certificate, refuses pages of other origins and foreign Host headers like the
 * computer server, and closes the VNC connection when the browser goes.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { connect, createServer as createNetServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { closeServer, freeLoopbackPort, listening } from "../common/listen.js";
import { loadOnce } from "../common/load-once.js";
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

/** How long x11vnc runs on after its last viewer left: a reload or a reconnect finds it running. */
export const VNC_LINGER_MS = 60_000;

/**
 * Listens for viewers: raw VNC on 127.0.0.1:`settings.port` and the noVNC viewer on
 * `settings.webPort`. x11vnc itself starts with the first viewer and ends `lingerMs` after the last
 * one left (x11vnc held 6 MB and a 4 MB shared copy of the screen in every desktop, most of them
 * never watched). A viewer that comes while it cannot start is closed, and the reason logged.
 */
export async function startVnc(
  settings: VncSettings,
  display: Record<string, string>,
  web: WebOptions,
  options: { log?: (message: string) => void; lingerMs?: number } = {},
): Promise<VncServers> {
  const log = options.log ?? (() => undefined);
  const x11vnc = new X11vncOnDemand({ ...process.env, ...display }, settings.password, log, options.lingerMs);
  let raw: RawRelay | undefined;
  let viewer: Server | undefined;
  const stop = async () => {
    if (viewer) await closeServer(viewer);
    await raw?.close();
    await x11vnc.stop();
  };
  try {
    raw = await startRawRelay(settings.port, x11vnc, log);
    viewer = await startViewer(settings, web, x11vnc, log);
    return { stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** x11vnc, started when a viewer asks for it and ended once none has been connected for a while. */
class X11vncOnDemand {
  private child: ChildProcess | undefined;
  /** Its port once it listens; cleared when it ends or is being ended. */
  private starting: Promise<number> | undefined;
  private viewers = 0;
  private linger: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The x11vnc processes ended here (the others' ends are logged). */
  private readonly ended = new WeakSet<ChildProcess>();

  constructor(
    private readonly env: NodeJS.ProcessEnv,
    private readonly password: string,
    private readonly log: (message: string) => void,
    private readonly lingerMs = VNC_LINGER_MS,
  ) {}

  /** A connection to x11vnc for one viewer (started first if needed); counted until it closes. */
  async connect(): Promise<Socket> {
    this.viewers++;
    clearTimeout(this.linger);
    try {
      for (let attempt = 1; ; attempt++) {
        const starting = this.running();
        const port = await starting;
        try {
          const tcp = await greeted(port);
          tcp.once("close", () => this.left());
          return tcp;
        } catch (err) {
          // An x11vnc killed before its exit was told refuses, or accepts and closes at once:
          // another is started, once.
          if (attempt > 1) throw err;
          this.log(`x11vnc did not answer a viewer (${(err as Error).message}); it starts again for it`);
          if (this.starting === starting) await this.end();
        }
      }
    } catch (err) {
      this.left();
      throw err;
    }
  }

  async stop() {
    this.stopped = true;
    clearTimeout(this.linger);
    await this.end();
  }

  private left() {
    this.viewers--;
    if (this.viewers > 0 || this.stopped) return;
    this.linger = setTimeout(() => void this.end(), this.lingerMs);
    this.linger.unref();
  }

  private running(): Promise<number> {
    if (this.stopped) return Promise.reject(new Error("VNC is stopping"));
    if (!this.starting) {
      const starting = this.start();
      this.starting = starting;
      starting.catch(() => {
        if (this.starting === starting) this.starting = undefined;
      });
    }
    return this.starting;
  }

  private async start(): Promise<number> {
    const port = await freeLoopbackPort();
    const dir = await mkdtemp(join(tmpdir(), "hangar-vnc-"));
    // x11vnc reads the password from the file and deletes it (`rm:`), so it never shows in `ps`.
    const passwordFile = join(dir, "password");
    let child: ChildProcess | undefined;
    try {
      await writeFile(passwordFile, `${this.password}\n`, { mode: 0o600 });
      // Stopped while the file was written: nothing may start after the stop.
      if (this.stopped) throw new Error("VNC is stopping");
      child = spawn(
        "x11vnc",
        [
          "-display",
          String(this.env.DISPLAY),
          "-rfbport",
          String(port),
          "-localhost",
          "-forever",
          "-shared",
          // No remote control through X properties (any program on the display could send it) and
          // no external commands: x11vnc runs as the server's user, the agent's programs may not.
          "-noremote",
          "-nocmds",
        ].concat(["-passwdfile", `rm:${passwordFile}`, "-quiet", "-nossl", "-noipv6"]),
        { env: this.env, stdio: "ignore" },
      );
      const started = child;
      this.child = started;
      started.once("exit", (code, signal) => {
        if (started.pid !== undefined) removeSegmentsOf(started.pid, this.log);
        if (this.child === started) {
          this.child = undefined;
          this.starting = undefined;
        }
        if (!this.ended.has(started))
          this.log(`x11vnc ended (${signal ?? `code ${code}`}); it starts again for the next viewer`);
      });
      await waitForPort(port, "x11vnc", started);
      return port;
    } catch (err) {
      if (child) {
        if (this.child === child) this.child = undefined;
        this.ended.add(child);
        await terminate(child);
      }
      throw err;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  private async end() {
    const child = this.child;
    this.child = undefined;
    this.starting = undefined;
    if (!child) return;
    this.ended.add(child);
    await terminate(child);
  }
}

/** How long a VNC server may take to greet a new connection (x11vnc does so at once). */
const GREETING_MS = 10_000;

/**
 * A connection to the VNC server on 127.0.0.1:`port` once it has sent its first bytes (a VNC server
 * speaks first), paused with them unread. One that is being killed may still accept a connection
 * and close it at once, and one that is stuck may never greet: that is a failure here, not a
 * viewer's connection.
 */
export function greeted(port: number, withinMs = GREETING_MS): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    const fail = (err?: Error) => {
      socket.destroy();
      reject(err ?? new Error(`the VNC server on port ${port} closed the connection before greeting`));
    };
    const closed = () => fail();
    socket.once("error", fail);
    socket.once("close", closed);
    socket.setTimeout(withinMs, () =>
      fail(new Error(`the VNC server on port ${port} did not greet within ${withinMs} ms`)),
    );
    socket.once("data", (first: Buffer) => {
      socket.off("error", fail);
      socket.off("close", closed);
      socket.setTimeout(0);
      socket.pause();
      socket.unshift(first);
      resolve(socket);
    });
  });
}

/**
 * The System V shared-memory segments `pid` (gone) made, removed: x11vnc marks its polling segments
 * for removal only when it exits cleanly (SIGTERM, or its X server gone), and one killed outright
 * left about 1.7 MB in them for good (`ipcs -m`). A segment the X server still has attached (it
 * lets go once it has seen the killed client's connection close, which on a loaded machine can be
 * after this runs) is marked for removal all the same: it goes at its last detach.
 */
export function removeSegmentsOf(pid: number, log: (message: string) => void) {
  let table: string;
  try {
    table = readFileSync("/proc/sysvipc/shm", "utf8");
  } catch {
    return;
  }
  const ids = table
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f.length > 6 && Number(f[4]) === pid)
    .map((f) => f[1]);
  if (ids.length === 0) return;
  execFile(
    "ipcrm",
    ids.flatMap((id) => ["-m", id]),
    (err) => {
      if (err) log(`the shared memory x11vnc left could not be removed: ${err.message}`);
    },
  );
}

interface RawRelay {
  close(): Promise<void>;
}

/** Raw VNC on 127.0.0.1:`port`, each connection relayed to x11vnc (started for it if needed). */
async function startRawRelay(port: number, x11vnc: X11vncOnDemand, log: (message: string) => void) {
  const open = new Set<Socket>();
  const server = createNetServer((client) => {
    open.add(client);
    client.on("error", () => undefined);
    client.once("close", () => open.delete(client));
    x11vnc.connect().then(
      (tcp) => {
        if (client.destroyed) return void tcp.destroy();
        tcp.on("error", () => client.destroy());
        client.once("close", () => tcp.destroy());
        tcp.once("close", () => client.destroy());
        client.pipe(tcp);
        tcp.pipe(client);
      },
      (err: Error) => {
        log(`a VNC viewer was turned away: ${err.message}`);
        client.destroy();
      },
    );
  });
  await listening(server, {
    host: "127.0.0.1",
    tls: false,
    listen: () => server.listen(port, "127.0.0.1"),
  }).catch((err: Error) => {
    throw new Error(`VNC cannot listen on 127.0.0.1:${port}: ${err.message}`);
  });
  server.on("error", () => undefined);
  return {
    close: async () => {
      for (const socket of open) socket.destroy();
      await closeServer(server);
    },
  };
}

/** The noVNC pages and the WebSocket relay to x11vnc on `settings.webPort`. */
async function startViewer(
  settings: VncSettings,
  web: WebOptions,
  x11vnc: X11vncOnDemand,
  log: (message: string) => void,
): Promise<Server> {
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
  // `ws` is loaded by the first viewer: 30 ms of a container's start, most of them never watched.
  const sockets = loadOnce(
    async () => new (await import("ws")).WebSocketServer({ noServer: true, maxPayload: 16 * 1024 * 1024 }),
  );
  server.on("upgrade", async (req, socket, head) => {
    socket.on("error", () => socket.destroy());
    const reason = refused(req);
    if (reason) {
      socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\n${reason}\n`);
      return;
    }
    const relay = await sockets.get().catch((err: Error) => {
      log(`a VNC viewer was turned away: ${err.message}`);
      socket.destroy();
    });
    if (!relay || socket.destroyed) return;
    relay.handleUpgrade(req, socket, head, (ws) => {
      x11vnc.connect().then(
        (tcp) => {
          if (ws.readyState !== ws.OPEN) return void tcp.destroy();
          relaySocket(ws, tcp);
        },
        (err: Error) => {
          log(`a VNC viewer was turned away: ${err.message}`);
          if (ws.readyState === ws.OPEN) ws.close(1011, "VNC could not start");
        },
      );
    });
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
