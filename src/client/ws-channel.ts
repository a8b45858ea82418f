/**
 * The client's `/ws` transport: one WebSocket, one JSON frame per call, replies matched to calls by
 * order (the protocol has no ids). A call that times out or is aborted gives up its place: its
 * reply, when it comes, is dropped. The socket is opened at the first call (and again after it
 * closes); in cloud mode the first frame is the `authenticate` handshake.
 */
import type { WebSocket } from "ws";
import { HangarError, resultOf } from "./errors.js";

interface Pending {
  name: string;
  settle?: (reply: Record<string, unknown>) => void;
}

export class WsChannel {
  private socket: Promise<WebSocket> | undefined;
  private readonly pending: Pending[] = [];

  constructor(
    private readonly url: string,
    private readonly credentials: { apiKey?: string; containerName?: string },
  ) {}

  async send(name: string, params: unknown, signal: AbortSignal): Promise<unknown> {
    const socket = await untilAborted(this.open(), signal);
    const reply = await this.exchange(socket, name, params, signal);
    // cua's shape: `{"success": true, ...result}`; a result that is not an object is in `content`.
    const { success: _s, ...fields } = reply;
    const keys = Object.keys(fields);
    const bare = keys.length === 1 && keys[0] === "content" && !isObject(fields.content);
    return resultOf(name, reply, bare ? fields.content : fields);
  }

  async close(): Promise<void> {
    const socket = await this.socket?.catch(() => undefined);
    this.socket = undefined;
    socket?.close();
  }

  private exchange(socket: WebSocket, name: string, params: unknown, signal: AbortSignal) {
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const entry: Pending = { name };
      const onAbort = () => {
        entry.settle = undefined;
        reject(signal.reason);
      };
      entry.settle = (reply) => {
        signal.removeEventListener("abort", onAbort);
        if (reply.success === false && reply.code === "network")
          reject(new HangarError("network", String(reply.error)));
        else resolve(reply);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.pending.push(entry);
      socket.send(JSON.stringify({ command: name, params }));
    });
  }

  private open(): Promise<WebSocket> {
    this.socket ??= this.connect().catch((err) => {
      this.socket = undefined;
      throw new HangarError("network", `cannot connect to ${this.url}: ${(err as Error).message}`);
    });
    return this.socket;
  }

  private async connect(): Promise<WebSocket> {
    // Loaded on first use: a /cmd client never needs it.
    const { WebSocket } = await import("ws");
    const socket = new WebSocket(this.url);
    await new Promise<void>((resolve, reject) => {
      socket.once("open", resolve);
      socket.once("error", reject);
    });
    socket.on("error", () => undefined); // 'close' follows and fails what is pending
    socket.on("message", (data) => this.pending.shift()?.settle?.(JSON.parse(String(data))));
    socket.on("close", () => {
      this.socket = undefined;
      for (const entry of this.pending.splice(0)) {
        entry.settle?.({ success: false, code: "network", error: `${entry.name}: the WebSocket closed` });
      }
    });
    const { apiKey, containerName } = this.credentials;
    if (apiKey) {
      const params = { api_key: apiKey, container_name: containerName };
      const reply = await this.exchange(socket, "authenticate", params, AbortSignal.timeout(10_000));
      if (reply.success !== true) {
        socket.close();
        throw new Error(String(reply.error ?? "authentication failed"));
      }
    }
    return socket;
  }
}

function isObject(value: unknown): boolean {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** `work`, or the signal's reason if it is aborted first (the work goes on, for the next call). */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
