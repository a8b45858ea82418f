/**
 * A log file as a stream, as `tail -n N [-F]` shows it: the last lines, then (when following) what
 * is appended, until the caller's signal aborts. A file that does not exist yet is empty; one that
 * is replaced or truncated is read again from its start.
 */
import { open, stat } from "node:fs/promises";
import { Readable } from "node:stream";
import { setTimeout as delay } from "node:timers/promises";
import type { LogOptions } from "./runtime.js";

/** How often a followed file is looked at (a log line waits at most this long). */
const FOLLOW_INTERVAL_MS = 250;
/** How much of a file's end is read to find its last lines. */
const TAIL_WINDOW = 1024 * 1024;

export function followFile(path: string, options: LogOptions): Readable {
  return Readable.from(readLog(path, options), { objectMode: false });
}

async function* readLog(path: string, { lines, follow, signal }: LogOptions): AsyncGenerator<Buffer> {
  let offset = 0;
  const size = (await stat(path).catch(() => undefined))?.size ?? 0;
  if (size > 0) {
    const start = lines === undefined ? 0 : Math.max(0, size - TAIL_WINDOW);
    const text = await readRange(path, start, size);
    offset = size;
    yield lines === undefined ? text : lastLines(text, lines);
  }
  while (follow && !signal.aborted) {
    await delay(FOLLOW_INTERVAL_MS, undefined, { signal }).catch(() => undefined);
    if (signal.aborted) return;
    const now = (await stat(path).catch(() => undefined))?.size ?? 0;
    if (now < offset) offset = 0; // replaced or truncated: a new run's log
    if (now > offset) {
      yield await readRange(path, offset, now);
      offset = now;
    }
  }
}

async function readRange(path: string, start: number, end: number): Promise<Buffer> {
  const handle = await open(path, "r");
  try {
    const buffer = Buffer.alloc(end - start);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, start);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** The last `count` lines of `text` (a final line without its newline counts). */
export function lastLines(text: Buffer, count: number): Buffer {
  if (count <= 0) return Buffer.alloc(0);
  let end = text.length;
  if (end > 0 && text[end - 1] === 0x0a) end--;
  let cut = end;
  for (let seen = 0; cut > 0; ) {
    if (text[cut - 1] === 0x0a && ++seen === count) break;
    cut--;
  }
  return text.subarray(cut);
}
