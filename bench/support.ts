/** Starts the built `hangar` CLI as a separate process, as a user would, and waits until it answers. */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { Agent, type IncomingMessage, request } from "node:http";
import { type Agent as TlsAgent, request as tlsRequest } from "node:https";
import { createServer } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { setFlagsFromString } from "node:v8";
import { memoryEnv } from "../src/common/memory-env.js";

export async function freePort(): Promise<number> {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

export interface SpawnedServer {
  url: string;
  child: ChildProcess;
  /** Resident memory of the server process in MB (from /proc). */
  rssMb(): number;
  stop(): Promise<void>;
}

/** The server's resident memory 10 s and 60 s into a quiet spell, as text for a table. */
export async function rssWhileIdle(server: SpawnedServer): Promise<string> {
  await sleep(10_000);
  const after10 = server.rssMb();
  await sleep(50_000);
  return `${after10.toFixed(1)} MB after 10 s, ${server.rssMb().toFixed(1)} MB after 60 s`;
}

/**
 * Starts `hangar ARGS` on a free port. `nodeArgs` go to Node before the script (e.g. `--import` of a
 * probe); `ipc` opens a message channel to the server's process (for such a probe).
 */
export async function spawnHangar(
  args: string[],
  env: Record<string, string> = {},
  options: { nodeArgs?: string[]; ipc?: boolean; bin?: string } = {},
): Promise<SpawnedServer> {
  const port = await freePort();
  const script = [
    ...(options.nodeArgs ?? []),
    options.bin ?? "bin/hangar.js",
    ...args,
    "--port",
    String(port),
  ];
  const child = spawn(process.execPath, script, {
    // The memory settings the container and the systemd unit start the server with.
    env: { ...process.env, ...memoryEnv(), HANGAR_LOG_LEVEL: "warn", ...env },
    stdio: options.ipc ? ["ignore", "ignore", "inherit", "ipc"] : ["ignore", "ignore", "inherit"],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    const ok = await fetch(`${url}/status`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (child.exitCode !== null)
      throw new Error(`hangar ${args.join(" ")} exited with code ${child.exitCode}`);
    await sleep(50);
  }
  return {
    url,
    child,
    rssMb: () => {
      const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
      return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
    },
    stop: async () => {
      if (child.exitCode !== null) return;
      child.kill("SIGTERM");
      await once(child, "exit");
    },
  };
}

// The client parses replies of megabytes (file chunks, screenshots) and grows its heap as
// `hangar serve` does (src/cli/serve.ts); with V8's default growth, the client's own garbage
// collector sets the pace of a sequential download (about 80 MB/s instead of 100).
setFlagsFromString("--heap-growing-percent=400");

const agent = new Agent({ keepAlive: true, maxSockets: 64 });

/** POSTs one command over a kept-alive connection and returns the parsed final event. */
export function cmd(url: string, command: string, params: unknown = {}): Promise<Record<string, any>> {
  const body = Buffer.from(JSON.stringify({ command, params }));
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/cmd`,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": body.length },
      },
      (res) => {
        // Decoded as it arrives (no copy of the whole reply into one buffer first).
        res.setEncoding("utf8");
        let text = "";
        res.on("data", (c: string) => {
          text += c;
        });
        res.on("end", () => {
          // One event per reply: everything after the first `data: ` is the JSON (as cua's clients read it).
          try {
            resolve(JSON.parse(text.slice(6)));
          } catch {
            reject(new Error(`not an event: ${text.slice(0, 200)}`));
          }
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * How `putFile` and `getFile` reach the server: by default plain HTTP on this module's kept-alive
 * agent; for an `https:` URL, give the agent (with the server's certificate) and, in cloud mode, the
 * key headers.
 */
export interface FileTransferOptions {
  agent?: TlsAgent;
  headers?: Record<string, string>;
}

/** Starts a request to `url` with `options`' agent and headers (HTTPS for an `https:` URL). */
function fileRequest(
  url: string,
  method: string,
  options: FileTransferOptions,
  headers: Record<string, string>,
  onResponse: (res: IncomingMessage) => void,
) {
  const settings = { method, headers: { ...options.headers, ...headers } };
  return url.startsWith("https:")
    ? tlsRequest(url, { ...settings, agent: options.agent }, onResponse)
    : request(url, { ...settings, agent }, onResponse);
}

/** Uploads `times` copies of `chunk` with one `PUT` (streamed, with its length declared). */
export function putFile(
  url: string,
  chunk: Buffer,
  times: number,
  options: FileTransferOptions = {},
): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = fileRequest(
      url,
      "PUT",
      options,
      { "content-length": String(chunk.length * times) },
      (res) => {
        res.resume();
        res.on("end", () =>
          res.statusCode === 200 || res.statusCode === 201
            ? resolve()
            : reject(new Error(`PUT: ${res.statusCode}`)),
        );
      },
    );
    req.on("error", reject);
    let sent = 0;
    const pump = () => {
      while (sent < times) {
        sent++;
        if (!req.write(chunk)) return void req.once("drain", pump);
      }
      req.end();
    };
    pump();
  });
}

/** Downloads with `GET`, discarding the bytes; resolves with how many arrived. */
export function getFile(url: string, options: FileTransferOptions = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = fileRequest(url, "GET", options, {}, (res) => {
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
      });
      res.on("end", () =>
        res.statusCode === 200 ? resolve(size) : reject(new Error(`GET: ${res.statusCode}`)),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}
