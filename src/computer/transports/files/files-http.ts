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
import { type Context, Hono } from "hono";
import { CommandError, describeOsError } from "../../../common/errors.js";
import { type FileSystem, localFileSystem } from "../../../common/file-system.js";
import { type Logger, silentLogger } from "../../../common/logger.js";
import { formatBytes } from "../../../common/sizes.js";
import { expandPath, openFile, sendRange, writeStreamed } from "../../../os/files.js";
import { dropTheRest } from "../../http/body.js";
import { preparedHeaders, replyByHand, sentByHand } from "../../http/by-hand.js";
import type { ComputerEnv } from "../../http/env.js";
import { httpStatusOf } from "../../http/failure-status.js";
import { parseRange } from "../../http/range.js";
import { checkDeclaredSize, limitedBody } from "../../http/streamed-body.js";

export interface FileRoutesOptions {
  /** Largest `PUT` body in bytes. */
  bodyLimitBytes: number;
  /** The desktop user's file system (`--command-user`: its file worker's); default this process's. */
  files?: FileSystem;
  log?: Logger;
}

export function fileRoutes(options: FileRoutesOptions) {
  const log = options.log ?? silentLogger;
  const files = options.files ?? localFileSystem;
  const routes = new Hono<ComputerEnv>();
  routes.on(["GET", "HEAD"], "/*", (c) => answer(c, log, () => sendFile(c, files)));
  routes.put("/*", (c) => answer(c, log, () => receiveFile(c, options.bodyLimitBytes, files)));
  return routes;
}

/** Runs a handler that writes its own response; turns its failures into JSON replies. */
async function answer(c: Context<ComputerEnv>, log: Logger, handler: () => Promise<Response | undefined>) {
  try {
    return (await handler()) ?? sentByHand(c);
  } catch (err) {
    const failure = describeOsError(err);
    const status = httpStatusOf(failure);
    const res = c.env.outgoing;
    if (res.headersSent) {
      // A client that went away is not the server's failure.
      if (!res.destroyed) log.warn({ err, path: c.req.path }, "file transfer failed after its headers");
      res.destroy();
      return sentByHand(c);
    }
    if (status >= 500) log.error({ err, path: c.req.path }, "file transfer failed");
    const headers: Record<string, string> =
      failure.code === "out_of_range" ? { "content-range": `bytes */${failure.fields.size}` } : {};
    return c.json({ detail: failure.message }, status, headers);
  }
}

/** The file a request names: the URL path after `/files`, percent-decoded, `~` expanded. */
export function requestedPath(c: Context<ComputerEnv>): { path: string; abs: string } {
  const target = (c.env.incoming.url ?? "").split("?")[0];
  const encoded = target.replace(/^\/files/, "");
  let path: string;
  try {
    path = decodeURIComponent(encoded);
  } catch {
    throw new CommandError("invalid_params", "Invalid path: bad percent-encoding");
  }
  if (path === "/~" || path.startsWith("/~/")) path = path.slice(1);
  if (path === "/" || path === "")
    throw new CommandError("invalid_params", "Invalid path: give a file's path after /files/");
  try {
    return { path, abs: expandPath(path) };
  } catch (err) {
    if (err instanceof CommandError)
      throw new CommandError("invalid_params", err.message.replace("Invalid params: ", "Invalid "));
    throw err;
  }
}

async function sendFile(c: Context<ComputerEnv>, files: FileSystem): Promise<Response | undefined> {
  const { path, abs } = requestedPath(c);
  const info = await files.stat(abs).catch((err) => {
    throw describeOsError(err, path);
  });
  if (!info.isFile()) throw new CommandError("invalid_params", `Not a regular file: ${path}`);
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
  const { handle } = await openFile(abs, files).catch((err) => {
    throw describeOsError(err, path);
  });
  try {
    const { res } = replyByHand(c, range ? 206 : 200, headers);
    await sendRange(handle, res, start, end);
  } finally {
    await handle.close().catch(() => undefined);
  }
}

async function receiveFile(c: Context<ComputerEnv>, limit: number, files: FileSystem): Promise<undefined> {
  const { path, abs } = requestedPath(c);
  const incoming = c.env.incoming;
  checkDeclaredSize(incoming, limit, () => tooLarge(limit));
  const existed = await files.stat(abs).then(
    () => true,
    () => false,
  );
  let size: number;
  try {
    size = await writeStreamed(
      abs,
      limitedBody(incoming, limit, () => tooLarge(limit)),
      files,
    );
  } catch (err) {
    dropTheRest(incoming);
    throw describeOsError(err, path);
  }
  const text = JSON.stringify({ success: true, size });
  const { res } = replyByHand(c, existed ? 200 : 201, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

function tooLarge(limit: number) {
  return new CommandError(
    "too_large",
    `Request body too large: the limit is ${formatBytes(limit)} (--body-limit)`,
  );
}
