/**
 * The H.264 live stream as a program sees it: `WS /live` with `"codec": "h264"` (the `stream`
 * message and the packets), `GET /live.mp4` saved to a file, and the encoders (ffmpeg processes
 * started with the `tee` muxer) under this test's process.
 */
import { once } from "node:events";
import { readdirSync } from "node:fs";
import WebSocket from "ws";
import { descendants } from "./processes.js";

export interface Packet {
  audio: boolean;
  key: boolean;
  timestampMs: number;
  data: Buffer;
}

/** A viewer of `WS /live` asking for H.264. */
export class StreamSocket {
  readonly messages: any[] = [];
  readonly packets: Packet[] = [];
  private readonly listeners = new Set<() => void>();
  readonly closed: Promise<{ code: number; reason: string }>;

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data: Buffer, isBinary) => {
      if (isBinary) {
        if (this.messages.some((m) => m.type === "stream")) {
          this.packets.push({
            audio: (data[0] & 1) !== 0,
            key: (data[0] & 2) !== 0,
            timestampMs: data.readDoubleBE(1),
            data: data.subarray(9),
          });
        }
      } else {
        this.messages.push(JSON.parse(data.toString()));
      }
      for (const listener of this.listeners) listener();
    });
    this.closed = new Promise((resolve) => {
      ws.once("close", (code, reason) => resolve({ code, reason: reason.toString() }));
    });
  }

  static async open(
    url: string,
    settings: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ) {
    const ws = new WebSocket(url, { headers });
    const socket = new StreamSocket(ws);
    await once(ws, "open");
    ws.send(JSON.stringify({ type: "settings", codec: "h264", ...settings }));
    return socket;
  }

  /** Resolves with what `pick` returns once it returns something (checked at every message). */
  until<T>(pick: () => T | undefined | false, timeoutMs = 20_000): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const value = pick();
        if (value === undefined || value === false) return;
        cleanup();
        resolve(value);
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`no such message within ${timeoutMs} ms; got ${JSON.stringify(this.messages)}`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.listeners.delete(check);
      };
      this.listeners.add(check);
      check();
    });
  }

  message(type: string, after = 0) {
    return this.until(() => this.messages.slice(after).find((m) => m.type === type));
  }

  close() {
    this.ws.close();
    return this.closed;
  }
}

/** The live encoders (ffmpeg with the `tee` muxer) running under this process. */
export function liveEncoders(): number[] {
  return descendants(process.pid)
    .filter((p) => /(^|\/)ffmpeg /.test(p.args) && p.args.includes(" -f tee "))
    .map((p) => p.pid);
}

/** This process's open file descriptors. */
export function openFds(): number {
  return readdirSync("/proc/self/fd").length;
}
