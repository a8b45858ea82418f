/**
 * Real clients for the tests: HTTP(S) requests with a custom CA (node:https, since fetch cannot
 * take one without undici) and a `ws` WebSocket that reads replies in order.
 */
import { once } from "node:events";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import WebSocket from "ws";

export interface HttpReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json(): any;
}

/** One HTTP or HTTPS request; `ca` trusts a test certificate. */
export function send(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string | Buffer; ca?: Buffer } = {},
): Promise<HttpReply> {
  const target = new URL(url);
  const request = target.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      {
        method: init.method ?? (init.body === undefined ? "GET" : "POST"),
        headers: init.headers,
        ca: init.ca,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(init.body);
  });
}

/** POSTs `/cmd` and returns the reply with the parsed single event (as cua's Python client reads it). */
export async function postCommand(
  base: string,
  command: string,
  params: unknown,
  headers: Record<string, string> = {},
  ca?: Buffer,
) {
  const reply = await send(`${base}/cmd`, {
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ command, params }),
    ca,
  });
  const event = reply.text.startsWith("data: ") ? JSON.parse(reply.text.trim().slice(6)) : undefined;
  return { ...reply, event };
}

/** A WebSocket client that answers `request()` with the next reply frame, in order. */
export class TestSocket {
  private readonly inbox: string[] = [];
  private readonly waiting: ((frame: string | undefined) => void)[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  /** Replies that came as binary frames (cua's clients and browsers expect text frames). */
  binaryFrames = 0;

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data, isBinary) => {
      if (isBinary) this.binaryFrames++;
      const frame = data.toString();
      const waiter = this.waiting.shift();
      if (waiter) waiter(frame);
      else this.inbox.push(frame);
    });
    this.closed = new Promise((resolve) => {
      ws.once("close", (code, reason) => {
        for (const waiter of this.waiting.splice(0)) waiter(undefined);
        resolve({ code, reason: reason.toString() });
      });
    });
  }

  static async open(url: string, options: WebSocket.ClientOptions = {}): Promise<TestSocket> {
    const ws = new WebSocket(url, { maxPayload: 256 * 1024 * 1024, ...options });
    const socket = new TestSocket(ws);
    await once(ws, "open");
    return socket;
  }

  /** The next frame from the server, parsed; undefined when the socket closed first. */
  next(): Promise<any> {
    const frame = this.inbox.shift();
    if (frame !== undefined) return Promise.resolve(JSON.parse(frame));
    if (this.ws.readyState === WebSocket.CLOSED) return Promise.resolve(undefined);
    return new Promise((resolve) =>
      this.waiting.push((f) => resolve(f === undefined ? undefined : JSON.parse(f))),
    );
  }

  sendRaw(data: string | Buffer, binary = false) {
    this.ws.send(data, { binary });
  }

  /** Sends `{command, params}` and returns its reply. */
  async request(command: string, params?: unknown): Promise<any> {
    this.sendRaw(JSON.stringify(params === undefined ? { command } : { command, params }));
    return this.next();
  }

  close() {
    this.ws.close();
    return this.closed;
  }
}

/** The `/ws` URL of a server URL (http → ws, https → wss). */
export function wsUrl(base: string): string {
  return `${base.replace(/^http/, "ws")}/ws`;
}
