/**
 * Reads a request body straight from Node's stream (much faster than the Web stream for bodies of
 * megabytes), refusing more than `limit` bytes.
 */
import { IncomingMessage } from "node:http";
import type { Context } from "hono";
import { IDLE_RELEASE_MS, idleTimer } from "../../common/idle.js";
import { formatBytes } from "../../common/sizes.js";
import { type CommandFrame, parseCommandFrame } from "../core/frame.js";
import type { ComputerEnv } from "./env.js";
import { type ParseJsonOptions, parseJsonBytes } from "./json-bytes.js";

export class BodyTooLargeError extends Error {}

/** Told of a body read by `readBodyThen`: the error, or the body. */
export type BodyDone = (err: Error | undefined, body: Buffer | undefined) => void;

/** A body being read: kept on its request, so that the stream's listeners are the same functions for all. */
interface Reading {
  limit: number;
  target: Buffer | undefined;
  chunks: Buffer[] | undefined;
  size: number;
  done: BodyDone;
}
const READING = Symbol("body being read");
type BeingRead = IncomingMessage & { [READING]?: Reading };

/**
 * The whole body, to `done` (a `BodyTooLargeError` beyond `limit` bytes). With `into` (at least
 * `content-length` bytes), the body is copied there as it arrives instead of being gathered and
 * joined: the caller reuses that buffer from body to body. No promise and no function is made per
 * body: `/cmd` reads one for every command.
 */
export function readBodyThen(
  incoming: IncomingMessage,
  limit: number,
  into: Buffer | undefined,
  done: BodyDone,
) {
  const declared = Number(incoming.headers["content-length"]);
  if (declared > limit) {
    dropTheRest(incoming);
    done(new BodyTooLargeError(), undefined);
    return;
  }
  const target = into && declared <= into.length ? into : undefined;
  (incoming as BeingRead)[READING] = { limit, target, chunks: undefined, size: 0, done };
  incoming.on("data", onBodyData);
  incoming.on("end", onBodyEnd);
  incoming.on("error", onBodyError);
}

/** `readBodyThen` as a promise. */
export function readBody(incoming: IncomingMessage, limit: number, into?: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    readBodyThen(incoming, limit, into, (err, body) => (err ? reject(err) : resolve(body as Buffer))),
  );
}

function onBodyData(this: BeingRead, chunk: Buffer) {
  const reading = this[READING] as Reading;
  const size = reading.size + chunk.length;
  if (size > reading.limit) {
    stopReading(this);
    dropTheRest(this);
    reading.done(new BodyTooLargeError(), undefined);
    return;
  }
  const target = reading.target;
  if (target && size <= target.length) chunk.copy(target, reading.size);
  else if (reading.chunks) reading.chunks.push(chunk);
  else reading.chunks = [chunk];
  reading.size = size;
}

function onBodyEnd(this: BeingRead) {
  const reading = stopReading(this);
  const { target, chunks, size } = reading;
  let body: Buffer;
  if (target && !chunks) body = target.subarray(0, size);
  // Node's parser keeps a body to its content-length, so this is a body that came without one.
  else if (target)
    body = Buffer.concat([target.subarray(0, size - sum(chunks ?? [])), ...(chunks ?? [])], size);
  else if (!chunks) body = Buffer.alloc(0);
  else body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size);
  reading.done(undefined, body);
}

function onBodyError(this: BeingRead, err: Error) {
  stopReading(this).done(err, undefined);
}

function stopReading(incoming: BeingRead): Reading {
  const reading = incoming[READING] as Reading;
  incoming[READING] = undefined;
  incoming.off("data", onBodyData);
  incoming.off("end", onBodyEnd);
  incoming.off("error", onBodyError);
  return reading;
}

/** How long a refused body is read (and dropped) for, so that the client sees the answer. */
const DROP_GRACE_MS = 2000;

/**
 * After refusing a body: reads and drops the rest of it, for a moment, then closes the connection
 * if it is still coming. Closing at once, with unread data, makes the kernel reset the connection,
 * and the client then loses the answer.
 */
export function dropTheRest(incoming: IncomingMessage) {
  if (incoming.readableEnded) return;
  incoming.resume();
  const socket = incoming.socket;
  const timer = setTimeout(() => socket.destroy(), DROP_GRACE_MS);
  timer.unref();
  // Both listeners go once either fires: a kept-alive socket sees many refused bodies.
  const done = () => {
    clearTimeout(timer);
    incoming.off("end", done);
    socket.off("close", done);
  };
  incoming.once("end", done);
  socket.once("close", done);
}

export type JsonBody = { ok: true; value: unknown } | { ok: false; status: 400 | 413; detail: string };

/**
 * Reads and parses a JSON body of at most `limit` bytes (counted while it streams in, never
 * buffered beyond). An empty body is `empty`. Failures say what was wrong and which status fits.
 */
export function readJsonBody(
  incoming: IncomingMessage,
  limit: number,
  empty: unknown = undefined,
  parsing: ParseJsonOptions = {},
): Promise<JsonBody> {
  return new Promise((resolve) => readJsonBodyThen(incoming, limit, empty, parsing, resolve));
}

/** `readJsonBody`, told to `done`. */
export function readJsonBodyThen(
  incoming: IncomingMessage,
  limit: number,
  empty: unknown,
  parsing: ParseJsonOptions,
  done: (read: JsonBody) => void,
) {
  const scratch = scratchFor(Number(incoming.headers["content-length"]));
  readBodyThen(incoming, limit, scratch?.buffer, (err, body) => {
    try {
      done(err ? readFailure(err, limit) : parsedBody(body as Buffer, empty, parsing));
    } finally {
      // What is parsed is copied out of the body: its buffer can serve the next one.
      scratch?.giveBack();
    }
  });
}

function readFailure(err: Error, limit: number): JsonBody {
  if (err instanceof BodyTooLargeError) {
    return { ok: false, status: 413, detail: `Request body too large: the limit is ${formatBytes(limit)}` };
  }
  return { ok: false, status: 400, detail: `Could not read the request body: ${err.message}` };
}

function parsedBody(body: Buffer, empty: unknown, parsing: ParseJsonOptions): JsonBody {
  try {
    if (empty !== undefined && onlyWhitespace(body)) return { ok: true, value: empty };
    return { ok: true, value: parseJsonBytes(body, parsing) };
  } catch (err) {
    return { ok: false, status: 400, detail: `Invalid JSON body: ${(err as Error).message}` };
  }
}

/**
 * `readJsonBody` for a Web request, as `app.request()` makes one in a test (there is no Node stream
 * to count while it arrives: the body is read, then measured).
 */
async function readRequestJson(
  request: Request,
  limit: number,
  parsing: ParseJsonOptions,
): Promise<JsonBody> {
  const body = Buffer.from(await request.arrayBuffer());
  if (body.length > limit) {
    return { ok: false, status: 413, detail: `Request body too large: the limit is ${formatBytes(limit)}` };
  }
  try {
    return { ok: true, value: parseJsonBytes(body, parsing) };
  } catch (err) {
    return { ok: false, status: 400, detail: `Invalid JSON body: ${(err as Error).message}` };
  }
}

/** Bodies of this size or more (and at most SCRATCH_LARGEST) are read into a reused buffer. */
const SCRATCH_SMALLEST = 256 * 1024;
const SCRATCH_LARGEST = 8 * 1024 * 1024;
let spareScratch: Buffer | undefined;
/** The spare buffer is let go after a quiet spell, with the other caches. */
const scratchIdle = idleTimer(IDLE_RELEASE_MS, () => {
  spareScratch = undefined;
});

/**
 * A buffer for a body of `declared` bytes (megabyte `write_bytes` chunks come one after another):
 * the spare one when it is large enough and free, else a new one that becomes the spare.
 */
function scratchFor(declared: number): { buffer: Buffer; giveBack(): void } | undefined {
  if (!(declared >= SCRATCH_SMALLEST && declared <= SCRATCH_LARGEST)) return undefined;
  scratchIdle.touch();
  let buffer = spareScratch && spareScratch.length >= declared ? spareScratch : undefined;
  spareScratch = undefined;
  buffer ??= Buffer.allocUnsafeSlow(Math.max(declared, 2 * 1024 * 1024));
  return {
    buffer,
    giveBack: () => {
      if (!spareScratch || spareScratch.length < buffer.length) spareScratch = buffer;
    },
  };
}

function sum(chunks: Buffer[]): number {
  return chunks.reduce((total, chunk) => total + chunk.length, 0);
}

function onlyWhitespace(body: Buffer): boolean {
  for (const byte of body) if (byte !== 0x20 && byte !== 0x0a && byte !== 0x0d && byte !== 0x09) return false;
  return true;
}

/** Whether a command takes a parameter as bytes (its schema is a `base64Param`). */
export type TakesBytes = (command: string, param: string) => boolean;

/**
 * How a frame's body is parsed: its long base64 parameters come decoded, as Buffers (`write_bytes`'
 * chunks), where the command's schema says bytes; everywhere else a string stays a string. Made
 * once per route.
 */
export function frameParsing(takesBytes: TakesBytes | undefined): ParseJsonOptions {
  if (!takesBytes) return {};
  return {
    decodeBase64At: (path, root) => {
      const command = (root as { command?: unknown } | null)?.command;
      return (
        path.length === 2 &&
        path[0] === "params" &&
        typeof path[1] === "string" &&
        typeof command === "string" &&
        takesBytes(command, path[1])
      );
    },
  };
}

/** Why a body holds no command frame: the status and the `detail` of the 4xx reply. */
export type FrameRefusal = { status: 400 | 413; detail: string };

/**
 * The command frame in a request's body (Node's stream, or a Web request under `app.request()`),
 * or what is wrong with it (too large, not JSON, not a frame).
 */
export async function readFrame(
  request: IncomingMessage | Request,
  limit: number,
  parsing: ParseJsonOptions,
): Promise<CommandFrame | FrameRefusal> {
  return frameIn(
    request instanceof IncomingMessage
      ? await readJsonBody(request, limit, undefined, parsing)
      : await readRequestJson(request, limit, parsing),
  );
}

/** `readFrame` on Node's request, told to `done`. */
export function readFrameThen(
  incoming: IncomingMessage,
  limit: number,
  parsing: ParseJsonOptions,
  done: (frame: CommandFrame | FrameRefusal) => void,
) {
  readJsonBodyThen(incoming, limit, undefined, parsing, (read) => done(frameIn(read)));
}

function frameIn(read: JsonBody): CommandFrame | FrameRefusal {
  if (!read.ok) {
    return {
      status: read.status,
      detail: read.status === 413 ? `${read.detail} (--body-limit)` : read.detail,
    };
  }
  const frame = parseCommandFrame(read.value, "body");
  return "error" in frame ? { status: 400, detail: frame.error } : frame;
}

/**
 * The command frame in the body of `/cmd` or `/playwright_exec`, or the 4xx reply that says what is
 * wrong with it (too large, not JSON, not a frame).
 */
export async function readCommandFrame(
  c: Context<ComputerEnv>,
  limit: number,
  takesBytes?: TakesBytes,
): Promise<CommandFrame | Response> {
  const frame = await readFrame(c.env?.incoming ?? c.req.raw, limit, frameParsing(takesBytes));
  return "detail" in frame ? c.json({ detail: frame.detail }, frame.status) : frame;
}
