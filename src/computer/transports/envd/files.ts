/**
 * envd's `GET /files` and `POST /files` (`?path=…&username=…`, as the SDK sends them):
 *
 * - a download streams the file from disk (a `Range` gives a 206 with that part);
 * - an upload is a raw body (`application/octet-stream`, optionally `Content-Encoding: gzip`) or
 *   `multipart/form-data` with `file` parts (the part's file name is its path when `path` is not
 *   given). Each file is streamed to a temporary file beside its target and renamed over it once
 *   complete (src/common/atomic-write.ts); missing parent directories are made. The body limit
 *   counts the bytes as they arrive, before anything is kept. The answer is envd's: a list of
 *   `{path, name, type: "file"}`.
 *
 * Failures are envd's JSON, `{"code": <status>, "message": "…"}`. With an access token set, these
 * routes take the token (`X-Access-Token`) or a URL signed with it (`signature`,
 * `signature_expiration`, as the SDK's `downloadUrl`/`uploadUrl` make them).
 */
import { once } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import { basename, dirname } from "node:path";
import { pipeline, type Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { describeOsError } from "../../../common/errors.js";
import type { FileSystem } from "../../../common/file-system.js";
import { formatBytes } from "../../../common/sizes.js";
import { openFile, sendRange, writeStreamed } from "../../../os/files.js";
import { makeDirectory } from "../../../os/make-directory.js";
import { dropTheRest } from "../../http/body.js";
import { httpStatusOf } from "../../http/failure-status.js";
import { MultipartError, multipartBoundary, readMultipart } from "../../http/multipart.js";
import { parseRange } from "../../http/range.js";
import { byteLimit, checkDeclaredSize, limitedBody } from "../../http/streamed-body.js";
import { EnvdHttpError, type EnvdState } from "./envd-state.js";

interface FileQuery {
  path: string;
  username?: string;
  signature?: string;
  expiration?: string;
}

/** Answers `GET`/`HEAD`/`POST /files`; rejects with an `EnvdHttpError` the caller sends. */
export async function answerFiles(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  state: EnvdState,
  bodyLimitBytes: number,
  files: FileSystem,
) {
  const query: FileQuery = {
    path: url.searchParams.get("path") ?? "",
    username: url.searchParams.get("username") ?? undefined,
    signature: url.searchParams.get("signature") ?? undefined,
    expiration: url.searchParams.get("signature_expiration") ?? undefined,
  };
  const write = req.method === "POST";
  authorize(req, state, query, write ? "write" : "read");
  state.checkUser(query.username, (message) => new EnvdHttpError(401, message));
  if (write) await receive(req, res, query, state, bodyLimitBytes, files);
  else await send(req, res, query, state, files);
}

function authorize(req: IncomingMessage, state: EnvdState, query: FileQuery, operation: "read" | "write") {
  const token = req.headers["x-access-token"];
  if (typeof token === "string") {
    if (state.accepts(token)) return;
    throw new EnvdHttpError(401, "access token present in header but does not match");
  }
  if (!state.secured) return;
  if (query.signature === undefined) {
    throw new EnvdHttpError(
      401,
      "unauthorized access, please provide a valid access token (X-Access-Token) or a signed URL",
    );
  }
  const fields = {
    path: query.path,
    operation,
    username: query.username ?? "",
    expiration: query.expiration,
  };
  if (!state.acceptsSignature(query.signature, fields)) {
    throw new EnvdHttpError(401, "invalid signature, or the signature has expired");
  }
}

async function send(
  req: IncomingMessage,
  res: ServerResponse,
  query: FileQuery,
  state: EnvdState,
  files: FileSystem,
) {
  const path = resolvePath(state, query.path);
  // Non-blocking: a FIFO must not hang the open; only regular files are sent.
  const { handle, info } = await openFile(path, files).catch((err) => {
    throw httpError(err, path);
  });
  try {
    if (info.isDirectory()) throw new EnvdHttpError(400, `path '${path}' is a directory`);
    if (!info.isFile()) throw new EnvdHttpError(400, `path '${path}' is not a regular file`);
    let range: { start: number; end: number } | undefined;
    try {
      range = parseRange(req.headers.range, info.size);
    } catch (err) {
      throw new EnvdHttpError(416, (err as Error).message);
    }
    const { start, end } = range ?? { start: 0, end: info.size - 1 };
    const headers: Record<string, string | number> = {
      "content-type": "application/octet-stream",
      "content-disposition": `inline; filename*=UTF-8''${encodeURIComponent(basename(path))}`,
      "accept-ranges": "bytes",
      "last-modified": info.mtime.toUTCString(),
      "cache-control": "no-store",
      "content-length": Math.max(0, end - start + 1),
    };
    if (range) headers["content-range"] = `bytes ${start}-${end}/${info.size}`;
    res.writeHead(range ? 206 : 200, headers);
    if (req.method === "HEAD" || end < start) {
      res.end();
      return;
    }
    await sendRange(handle, res, start, end);
  } finally {
    await handle.close().catch(() => undefined);
  }
}

async function receive(
  req: IncomingMessage,
  res: ServerResponse,
  query: FileQuery,
  state: EnvdState,
  limit: number,
  files: FileSystem,
) {
  const refuse = (status: number, message: string) => {
    dropTheRest(req);
    return new EnvdHttpError(status, message);
  };
  if (Object.keys(req.headers).some((name) => name.startsWith("x-metadata-"))) {
    throw refuse(
      400,
      "file metadata (X-Metadata-* headers) is not kept by Hangar's envd: send the file without it",
    );
  }
  const tooLarge = () => new EnvdHttpError(413, tooLargeMessage(limit));
  checkDeclaredSize(req, limit, tooLarge);
  const encoding = (req.headers["content-encoding"] ?? "identity").trim().toLowerCase();
  if (encoding !== "identity" && encoding !== "gzip") {
    throw refuse(400, `unsupported Content-Encoding: ${encoding}, supported: identity, gzip`);
  }
  const type = req.headers["content-type"] ?? "";
  // The body as it arrives, counted against the limit; decompressed (and counted again) when gzip.
  const counted = limitedBody(req, limit, tooLarge);
  let body: Readable = counted;
  if (encoding === "gzip") {
    const inflated = byteLimit(limit, tooLarge);
    // A failure anywhere on the way destroys the whole chain, so the reader of `body` sees it.
    pipeline(counted, createGunzip(), inflated, () => undefined);
    body = inflated;
  }
  // Their errors reach whoever reads `body` (a stream keeps its error), which may not listen yet.
  for (const stream of new Set([counted, body])) stream.on("error", () => undefined);
  const written: { path: string; name: string; type: "file" }[] = [];
  try {
    if (/^application\/octet-stream\b/i.test(type)) {
      if (!query.path) throw new EnvdHttpError(400, "path query parameter is required for raw body upload");
      const path = resolvePath(state, query.path);
      await writeFile(path, body, files);
      written.push({ path, name: basename(path), type: "file" });
    } else if (/^multipart\//i.test(type)) {
      const boundary = multipartBoundary(type);
      if (!boundary) throw new EnvdHttpError(400, "multipart body without a boundary in its Content-Type");
      await readMultipart(body, boundary, async (part) => {
        if (part.name !== "file") {
          part.body.resume();
          await once(part.body, "end");
          return;
        }
        const given = query.path || part.filename;
        if (!given)
          throw new EnvdHttpError(400, "a file part needs a path: the path query parameter or its file name");
        const path = resolvePath(state, given);
        if (written.some((w) => w.path === path)) {
          throw new EnvdHttpError(
            400,
            `you cannot upload multiple files to the same path '${path}' in one upload request`,
          );
        }
        await writeFile(path, part.body, files);
        written.push({ path, name: basename(path), type: "file" });
      });
    } else {
      throw new EnvdHttpError(
        400,
        `unsupported content type: ${type || "none"}, expected multipart/form-data or application/octet-stream`,
      );
    }
  } catch (err) {
    dropTheRest(req);
    throw uploadError(err, query.path);
  }
  const text = JSON.stringify(written);
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** Streams `source` to `path` through a temporary file, making missing parent directories. */
async function writeFile(path: string, source: Readable, files: FileSystem) {
  try {
    await makeDirectory(dirname(path), files);
  } catch (err) {
    source.destroy();
    throw httpError(err, dirname(path));
  }
  await writeStreamed(path, source, files).catch((err) => {
    throw uploadError(err, path);
  });
}

/** A failed upload's answer: the body's own failures (too large, not multipart, not gzip) are 400s. */
function uploadError(err: unknown, path: string): EnvdHttpError {
  if (err instanceof MultipartError) return new EnvdHttpError(400, err.message);
  if ((err as { code?: string }).code === "Z_DATA_ERROR" || (err as { errno?: number }).errno === -3) {
    return new EnvdHttpError(400, `the gzip body cannot be decompressed: ${(err as Error).message}`);
  }
  return httpError(err, path);
}

function tooLargeMessage(limit: number) {
  return `the upload is larger than the limit of ${formatBytes(limit)} (--body-limit)`;
}

function resolvePath(state: EnvdState, path: string): string {
  if (path.includes("\0")) throw new EnvdHttpError(400, "path contains a NUL byte");
  return state.resolve(path);
}

function httpError(err: unknown, path: string): EnvdHttpError {
  if (err instanceof EnvdHttpError) return err;
  const code = (err as NodeJS.ErrnoException)?.code ?? "";
  if (code === "ENOENT") return new EnvdHttpError(404, `path '${path}' does not exist`);
  const failure = describeOsError(err, path);
  return new EnvdHttpError(httpStatusOf(failure), failure.message);
}
