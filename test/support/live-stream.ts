/**
 * The H.264 live stream as a program sees it: `WS /live` with `"codec": "h264"` (the `stream`
 * message and the packets), `GET /live.mp4` saved to a file, and the encoders (ffmpeg processes
 * started with the `tee` muxer) under this test's process.
 */
import { once } from "node:events";
import { readdirSync, writeFileSync } from "node:fs";
import { expect } from "vitest";
import WebSocket from "ws";
import { descendants } from "./processes.js";
import { near, pixelAt, probeVideo } from "./video.js";

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

/**
 * A streamed HTTP body (`/live.mp4`, OSWorld's `/live/h264.mp4`) kept as it arrives. `save` writes
 * what came so far to a file (a fragmented MP4 cut anywhere still plays), so a test can wait for
 * what the stream shows (`lastFrameNear`) instead of for a while; `stop` ends it and saves the rest.
 */
export class SavedStream {
  private readonly chunks: Buffer[] = [];
  private readonly reading: Promise<void>;

  private constructor(
    readonly response: Response,
    private readonly abort: AbortController,
  ) {
    this.reading = (async () => {
      try {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          this.chunks.push(Buffer.from(chunk));
        }
      } catch {
        // aborted
      }
    })();
  }

  static async open(url: string): Promise<SavedStream> {
    const abort = new AbortController();
    const response = await fetch(url, { signal: abort.signal });
    return new SavedStream(response, abort);
  }

  save(path: string): string {
    writeFileSync(path, Buffer.concat(this.chunks));
    return path;
  }

  /** Resolves once the last frame received shows `colour` at (x, y). */
  lastFrameNear(path: string, x: number, y: number, colour: number[]) {
    return untilLastFrameNear(() => this.save(path), x, y, colour);
  }

  async stop(path: string): Promise<string> {
    this.abort.abort();
    await this.reading;
    return this.save(path);
  }
}

/**
 * Resolves once the video that `save` writes (what a stream sent so far) ends with a frame showing
 * `colour` at (x, y): how a test waits for a change to reach a stream's viewers.
 */
export async function untilLastFrameNear(
  save: () => string,
  x: number,
  y: number,
  colour: number[],
  timeout = 20_000,
) {
  await expect
    .poll(
      async () => {
        const path = save();
        const { frames } = await probeVideo(path).catch(() => ({ frames: [] as number[] }));
        const last = frames.at(-1);
        return last !== undefined && near(await pixelAt(path, last, x, y), colour);
      },
      { timeout, interval: 200 },
    )
    .toBe(true);
}
