/**
 * Files as raw bytes over HTTP, for transfers too large for base64 chunks through `/cmd`:
 *
 * - `GET /files/<path>` sends the file (`Range: bytes=a-b`, `a-` or `-n` gives a 206 with that
 *   part; `HEAD` the headers only);
 * - `PUT /files/<path>` streams the body to a temporary file beside the target, then renames it over
 *   the target: readers see the old file or the new one, as with `write_bytes`. The body limit
 *   (`--body-limit`) applies while the body streams in, and a failed upload leaves nothing behind.
 *
 * The URL path is the file's path, percent-encoded: `/files/tmp/a%20b.txt` is `/tmp/a b.txt`,
 * `/files/~/notes.txt` is in the home directory. Mounted after the app's `auth` middleware, so it
 * has the same authentication and origin rules as `/cmd`. Failures are JSON `{"detail": ...}`.
 */
import { stat } from "node:fs/promises";
import { type Context, Hono } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { CommandError, describeOsError } from "../../../common/errors.js";
import { type Logger, silentLogger } from "../../../common/logger.js";
import { formatBytes } from "../../../common/sizes.js";
import { expandPath, openFile, sendRange, writeStreamed } from "../../../os/files.js";
import { dropTheRest } from "../../http/body.js";
import { preparedHeaders, replyByHand, sentByHand } from "../../http/by-hand.js";
import type { ComputerEnv } from "../../http/env.js";
import { checkDeclaredSize, limitedBody } from "../../http/streamed-body.js";

export interface FileRoutesOptions {
  /** Largest `PUT` body in bytes. */
  bodyLimitBytes: number;
  log?: Logger;
}

/** The HTTP status of an OS error of a file transfer. */
export const STATUS_OF_ERRNO: Record<string, ContentfulStatusCode> = {
  ENOENT: 404,
  EACCES: 403,
  EPERM: 403,
  EISDIR: 400,
  ENOTDIR: 400,
  ENAMETOOLONG: 400,
  ELOOP: 400,
  ENOSPC: 507,
  EDQUOT: 507,
};

export class HttpFailure extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export function fileRoutes(options: FileRoutesOptions) {
  const log = options.log ?? silentLogger;
  const routes = new Hono<ComputerEnv>();
  routes.on(["GET", "HEAD"], "/*", (c) => answer(c, log, () => sendFile(c)));
  routes.put("/*", (c) => answer(c, log, () => receiveFile(c, options.bodyLimitBytes)));
  return routes;
}

/** Runs a handler that writes its own response; turns its failures into JSON replies. */
async function answer(c: Context<ComputerEnv>, log: Logger, handler: () => Promise<Response | undefined>) {
  try {
    return (await handler()) ?? sentByHand(c);
  } catch (err) {
    const failure = asHttpFailure(err);
    const res = c.env.outgoing;
    if (res.headersSent) {
      // A client that went away is not the server's failure.
      if (!res.destroyed) log.warn({ err, path: c.req.path }, "file transfer failed after its headers");
      res.destroy();
      return sentByHand(c);
    }
    if (failure.status >= 500) log.error({ err, path: c.req.path }, "file transfer failed");
    return c.json({ detail: failure.message }, failure.status, failure.headers);
  }
}

function asHttpFailure(err: unknown): HttpFailure {
  if (err instanceof HttpFailure) return err;
  const code = (err as NodeJS.ErrnoException)?.code ?? "";
  const described = describeOsError(err);
  const status = STATUS_OF_ERRNO[code] ?? (described.code === "invalid_params" ? 400 : 500);
  return new HttpFailure(status, described.message);
}

/** The file a request names: the URL path after `/files`, percent-decoded, `~` expanded. */
export function requestedPath(c: Context<ComputerEnv>): { path: string; abs: string } {
  const target = (c.env.incoming.url ?? "").split("?")[0];
  const encoded = target.replace(/^\/files/, "");
  let path: string;
  try {
    path = decodeURIComponent(encoded);
  } catch {
    throw new HttpFailure(400, "Invalid path: bad percent-encoding");
  }
  if (path === "/~" || path.startsWith("/~/")) path = path.slice(1);
  if (path === "/" || path === "")
    throw new HttpFailure(400, "Invalid path: give a file's path after /files/");
  try {
    return { path, abs: expandPath(path) };
  } catch (err) {
    if (err instanceof CommandError)
      throw new HttpFailure(400, err.message.replace("Invalid params: ", "Invalid "));
    throw err;
  }
}

async function sendFile(c: Context<ComputerEnv>): Promise<Response | undefined> {
  const { path, abs } = requestedPath(c);
  const info = await stat(abs).catch((err) => {
    throw withPath(err, path);
  });
  if (!info.isFile()) throw new HttpFailure(400, `Not a regular file: ${path}`);
  const range = parseRange(c.req.header("range"), info.size);
  const headers: Record<string, string | number> = {
    "content-type": "application/octet-stream",
    "accept-ranges": "bytes",
    "last-modified": info.mtime.toUTCString(),
  };
  const { start, end } = range ?? { start: 0, end: info.size - 1 };
  headers["content-length"] = Math.max(0, end - start + 1);
  if (range) headers["content-range"] = `bytes ${start}-${end}/${info.size}`;
  if (c.req.method === "HEAD" || info.size === 0 || end < start) {
    // Through Hono: it answers HEAD by running GET, and a reply written by hand would be written twice.
    return c.body(null, range ? 206 : 200, {
      ...preparedHeaders(c),
      ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, String(v)])),
    });
  }
  // Opened before the headers, so that a file that cannot be read is still a JSON failure.
  const { handle } = await openFile(abs).catch((err) => {
    throw withPath(err, path);
  });
  try {
    const { res } = replyByHand(c, range ? 206 : 200, headers);
    await sendRange(handle, res, start, end);
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/**
 * One byte range (`bytes=a-b`, `bytes=a-`, `bytes=-n`), or undefined for the whole file (no header,
 * several ranges, or another unit: RFC 9110 lets a server ignore those). Throws 416 when the range
 * lies outside the file.
 */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | undefined {
  if (!header) return undefined;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === "" && match[2] === "")) return undefined;
  let start: number;
  let end: number;
  if (match[1] === "") {
    start = Math.max(0, size - Number(match[2]));
    end = size - 1;
    if (Number(match[2]) === 0) start = size;
  } else {
    start = Number(match[1]);
    end = match[2] === "" ? size - 1 : Math.min(Number(match[2]), size - 1);
    if (match[2] !== "" && Number(match[2]) < start) return undefined;
  }
  if (start >= size) {
    throw new HttpFailure(416, `Range not satisfiable: the file has ${size} bytes`, {
      "content-range": `bytes */${size}`,
    });
  }
  return { start, end };
}

async function receiveFile(c: Context<ComputerEnv>, limit: number): Promise<undefined> {
  const { path, abs } = requestedPath(c);
  const incoming = c.env.incoming;
  checkDeclaredSize(incoming, limit, () => tooLarge(limit));
  const existed = await stat(abs).then(
    () => true,
    () => false,
  );
  let size: number;
  try {
    size = await writeStreamed(
      abs,
      limitedBody(incoming, limit, () => tooLarge(limit)),
    );
  } catch (err) {
    dropTheRest(incoming);
    throw err instanceof HttpFailure ? err : withPath(err, path);
  }
  const text = JSON.stringify({ success: true, size });
  const { res } = replyByHand(c, existed ? 200 : 201, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

function tooLarge(limit: number) {
  return new HttpFailure(413, `Request body too large: the limit is ${formatBytes(limit)} (--body-limit)`);
}

function withPath(err: unknown, path: string): HttpFailure {
  const failure = asHttpFailure(err);
  const described = describeOsError(err, path);
  return new HttpFailure(failure.status, described.message, failure.headers);
}
