/**
 * E2B's envd, the daemon E2B's SDKs talk to inside a sandbox, on its own listener (`hangar serve
 * --envd-port`, port 49983 in E2B): the Connect services `process.Process` and
 * `filesystem.Filesystem` (protobuf or JSON, @connectrpc/connect-node) and the HTTP routes
 * `GET /health`, `POST /init`, `GET /envs`, `GET`/`POST /files`.
 *
 * Every request passes the origin policy first (a foreign `Origin` or `Host` is a 403), then the
 * access token once one is set (`X-Access-Token`; `/health` and `/init` go without it, `/files`
 * also takes a signed URL): without it, a 401 in envd's JSON. Docs: docs/e2b.md.
 */

import type { IncomingMessage, ServerResponse } from "node:http";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { type FileSystem, localFileSystem } from "../../../common/file-system.js";
import { type Logger, silentLogger } from "../../../common/logger.js";
import { corsHeaders, nodeHeader, type OriginPolicy, policyHeaders } from "../../../common/origin-policy.js";
import type { CommandUser } from "../../../os/command-user.js";
import type { ShellPool } from "../../../os/process.js";
import { describeZodError } from "../../core/param-messages.js";
import { BodyTooLargeError, readBody } from "../../http/body.js";
import type { PtySessions } from "../pty/pty-sessions.js";
import { ENVD_VERSION, EnvdHttpError, EnvdState, initBody } from "./envd-state.js";
import { answerFiles } from "./files.js";
import { filesystemService } from "./filesystem-service.js";
import { Filesystem } from "./gen/filesystem/filesystem_pb.js";
import { Process } from "./gen/process/process_pb.js";
import { processService } from "./process-service.js";
import { EnvdProcesses } from "./processes.js";

/** Largest `/init` body. */
const INIT_LIMIT = 1024 * 1024;

export interface EnvdListenerOptions {
  originPolicy: OriginPolicy;
  /** The access token from `--envd-token-file`; without it, the first `/init` may set one. */
  token?: string;
  /** Largest upload and RPC message. */
  bodyLimitBytes: number;
  /** The computer server's terminal sessions, where envd's terminals run. */
  pty: PtySessions;
  /** The computer server's warm shells, where envd's commands start when they can. */
  shells?: ShellPool;
  /** The user envd's processes run as and whose home is envd's (`--command-user`; default the server's). */
  user?: CommandUser;
  /** The file system of envd's user (`--command-user`: its file worker's); default this process's. */
  files?: FileSystem;
  log?: Logger;
}

/**
 * envd's request listener, with its state (the token, the processes it started); `close` ends
 * those. The listening server is the caller's (server.ts loads this module at envd's first request).
 */
export function envdListener(options: EnvdListenerOptions): {
  listener: (req: IncomingMessage, res: ServerResponse) => void;
  close(): void;
} {
  const log = options.log ?? silentLogger;
  const state = new EnvdState(options.token, options.user);
  const processes = new EnvdProcesses({ shells: options.shells, pty: options.pty, user: options.user, log });
  const fileSystem = options.files ?? localFileSystem;
  const files = filesystemService(state, fileSystem);
  const rpc = connectNodeAdapter({
    routes: (router) => {
      router.service(Process, processService(state, processes));
      router.service(Filesystem, files.impl);
    },
    readMaxBytes: options.bodyLimitBytes,
    fallback: (_req, res) =>
      sendError(res as ServerResponse, new EnvdHttpError(404, "no such route in envd")),
  });

  const listener = (req: IncomingMessage, res: ServerResponse) => {
    answer(req, res).catch((err) => {
      if (!(err instanceof EnvdHttpError))
        log.error({ err, path: req.url?.split("?")[0] }, "envd: request failed");
      if (res.headersSent) res.destroy();
      else
        sendError(res, err instanceof EnvdHttpError ? err : new EnvdHttpError(500, (err as Error).message));
    });
  };

  const answer = async (req: IncomingMessage, res: ServerResponse) => {
    const verdict = options.originPolicy.check(policyHeaders((name) => nodeHeader(req, name)));
    if (!verdict.ok) {
      log.warn({ reason: verdict.reason }, "envd: request from a browser refused");
      throw new EnvdHttpError(403, verdict.reason);
    }
    if (verdict.cors) {
      for (const [name, value] of Object.entries(corsHeaders(verdict.cors))) res.setHeader(name, value);
      res.setHeader("access-control-expose-headers", "*");
      if (req.method === "OPTIONS" && req.headers["access-control-request-method"]) {
        res.writeHead(204, {
          "access-control-allow-methods": "GET, HEAD, POST",
          "access-control-allow-headers": req.headers["access-control-request-headers"] ?? "*",
          "access-control-max-age": "600",
        });
        res.end();
        return;
      }
    }
    const url = new URL(req.url ?? "/", "http://envd");
    const route = `${req.method} ${url.pathname}`;
    if (route === "GET /health") {
      res.writeHead(204, { "cache-control": "no-store", "x-envd-version": ENVD_VERSION }).end();
    } else if (route === "POST /init") {
      state.init(await initRequest(req));
      res.writeHead(204, { "cache-control": "no-store", "x-envd-version": ENVD_VERSION }).end();
    } else if (url.pathname === "/files" && ["GET", "HEAD", "POST"].includes(req.method ?? "")) {
      await answerFiles(req, res, url, state, options.bodyLimitBytes, fileSystem);
    } else {
      const token = req.headers["x-access-token"];
      if (!state.accepts(typeof token === "string" ? token : undefined)) {
        throw new EnvdHttpError(
          401,
          "unauthorized access, please provide a valid access token (X-Access-Token)",
        );
      }
      if (route === "GET /envs") {
        const text = JSON.stringify(state.envVars);
        res.writeHead(200, { "content-type": "application/json", "cache-control": "no-store" }).end(text);
      } else {
        rpc(req, res);
      }
    }
  };

  return {
    listener,
    close: () => {
      processes.close();
      files.close();
    },
  };
}

/** `POST /init`'s JSON body (an empty body is `{}`), checked; a 400 that names what is wrong otherwise. */
async function initRequest(req: IncomingMessage) {
  let body: Buffer;
  try {
    body = await readBody(req, INIT_LIMIT);
  } catch (err) {
    if (err instanceof BodyTooLargeError) throw new EnvdHttpError(413, "the /init body is larger than 1 MiB");
    throw err;
  }
  let value: unknown = {};
  if (body.length > 0) {
    try {
      value = JSON.parse(body.toString("utf8"));
    } catch {
      throw new EnvdHttpError(400, "the /init body is not JSON");
    }
  }
  const parsed = initBody.safeParse(value);
  if (!parsed.success) throw new EnvdHttpError(400, `invalid /init body: ${describeZodError(parsed.error)}`);
  return parsed.data;
}

/** envd's error reply: `{"code": status, "message": "…"}`. */
function sendError(res: ServerResponse, err: EnvdHttpError) {
  const text = JSON.stringify({ code: err.status, message: err.message });
  res.writeHead(err.status, {
    "content-type": "application/json; charset=utf-8",
    "x-content-type-options": "nosniff",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}
