/**
 * `POST /cmd`: one command per request, answered as Server-Sent Events: the headers (together with
 * the reply when it is quick), one `data:` event per intermediate result (a streamed `run_command`)
 * and one for the outcome, in cua's framing (the result in `content` and, unless `--no-spread`, its
 * fields beside it).
 *
 * The server answers it in Node's request listener, before the Hono adapter (`cmdListener`): the
 * adapter makes a Request, a context and a Response for every request, as much again as the command.
 * The HTTP surface's gate (origin policy, cloud authentication: app.ts) is applied there first, and
 * the body limit while the body arrives. The same route as a Hono route (`cmdRoutes`) serves an app
 * without Node's listener: `app.request()` in memory, or an app served by another adapter.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { Hono } from "hono";
import { Stop } from "../../../common/abort.js";
import { CommandError } from "../../../common/errors.js";
import type { Logger } from "../../../common/logger.js";
import { isPromise } from "../../../common/settled.js";
import type { Outcome } from "../../core/outcome.js";
import type { CommandRegistry } from "../../core/registry.js";
import { dropTheRest, frameParsing, readFrame, readFrameThen } from "../../http/body.js";
import { EVENT_STREAM_HEADERS, eventStream, type HandWritten } from "../../http/by-hand.js";
import type { ComputerEnv } from "../../http/env.js";
import type { ParseJsonOptions } from "../../http/json-bytes.js";
import { type HeldEncodings, releaseEncodings } from "../../http/json-pieces.js";
import { cmdEventBytes, cmdEventText } from "./cmd-event.js";

export interface CmdRoutesOptions {
  registry: CommandRegistry;
  log: Logger;
  /** Copy a result's fields beside `content` (cua's clients read them there). */
  spread: boolean;
  bodyLimitBytes: number;
}

/**
 * What the HTTP surface decides on a request before its route (origin policy, authentication): the
 * headers to add to the reply (CORS), or a refusal, answered with `status` and `{"detail"}`.
 */
export type GateVerdict =
  | { ok: true; headers?: Readonly<Record<string, string>> }
  | { ok: false; status: number; detail: string; headers?: Readonly<Record<string, string>> };
export type NodeGate = (req: IncomingMessage) => GateVerdict | Promise<GateVerdict>;

/** A command still running after this long has its response headers sent before its reply. */
const HEADERS_ALONE_AFTER_MS = 20;
/** A streaming client this far behind (bytes not yet sent) is treated as gone: its command is cancelled. */
const STREAM_BACKLOG_LIMIT = 64 * 1024 * 1024;

/** The route for Hono: what `app.request()` and other adapters serve. */
export function cmdRoutes(options: CmdRoutesOptions) {
  const { registry, bodyLimitBytes } = options;
  const parsing = frameParsing((command, param) => registry.takesBytes(command, param));
  const routes = new Hono<ComputerEnv>();
  routes.post("/", async (c) => {
    const incoming = c.env?.incoming;
    const frame = await readFrame(incoming ?? c.req.raw, bodyLimitBytes, parsing);
    if ("detail" in frame) return c.json({ detail: frame.detail }, frame.status);
    if (!registry.resolve(frame.command)) {
      return c.json({ detail: registry.unknownCommandMessage(frame.command) }, 400);
    }
    const reply = eventStream(c);
    await new EventReply(reply.res, options, frame.command).run(frame.params, {
      client: incoming ? incoming.headers["x-hangar-client"] : c.req.header("x-hangar-client"),
      whenPaused: incoming ? incoming.headers["x-hangar-when-paused"] : c.req.header("x-hangar-when-paused"),
      connection: incoming?.socket,
    });
    return reply.done();
  });
  return routes;
}

/**
 * `POST /cmd` in Node's request listener: answers it (after `gate`) and returns true, or returns
 * false for every other request, which the caller hands on (to the Hono adapter).
 */
export function cmdListener(options: CmdRoutesOptions & { gate: NodeGate }) {
  const { registry, gate } = options;
  const route: FastRoute = {
    ...options,
    parsing: frameParsing((command, param) => registry.takesBytes(command, param)),
  };
  return function cmdRequest(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== "POST" || !isCmdPath(req.url)) return false;
    try {
      const verdict = gate(req);
      if (isPromise(verdict)) {
        verdict.then((decided) => admitted(route, req, res, decided)).catch((err) => failed(route, res, err));
      } else admitted(route, req, res, verdict);
    } catch (err) {
      failed(route, res, err);
    }
    return true;
  };
}

type FastRoute = CmdRoutesOptions & { parsing: ParseJsonOptions };

/** After the gate: the refusal, or the body read (to its limit) and the command run. */
function admitted(route: FastRoute, req: IncomingMessage, res: ServerResponse, verdict: GateVerdict) {
  if (!verdict.ok) {
    dropTheRest(req);
    json(res, verdict.status, verdict.detail, verdict.headers);
    return;
  }
  const extra = verdict.headers;
  readFrameThen(req, route.bodyLimitBytes, route.parsing, (frame) => {
    try {
      if ("detail" in frame) return json(res, frame.status, frame.detail, extra);
      const { registry } = route;
      if (!registry.resolve(frame.command)) {
        return json(res, 400, registry.unknownCommandMessage(frame.command), extra);
      }
      res.writeHead(200, extra ? { ...extra, ...EVENT_STREAM_HEADERS } : EVENT_STREAM_HEADERS);
      void new EventReply(res, route, frame.command).run(frame.params, {
        client: req.headers["x-hangar-client"],
        whenPaused: req.headers["x-hangar-when-paused"],
        connection: req.socket,
      });
    } catch (err) {
      failed(route, res, err);
    }
  });
}

function failed(route: CmdRoutesOptions, res: ServerResponse, err: unknown) {
  route.log.error({ err, path: "/cmd" }, "request failed");
  if (!res.headersSent) json(res, 500, "Internal server error");
  else res.destroy();
}

/** `/cmd`, with or without a query string (as Hono's router matches it). */
function isCmdPath(url: string | undefined): boolean {
  return url === "/cmd" || url?.startsWith("/cmd?") === true;
}

/** A JSON reply `{"detail": ...}`, as Hono's `c.json` writes it. */
function json(
  res: ServerResponse,
  status: number,
  detail: string,
  headers?: Readonly<Record<string, string>>,
) {
  const type = { "content-type": "application/json" };
  res.writeHead(status, headers ? { ...headers, ...type } : type);
  res.end(JSON.stringify({ detail }));
}

/** What the request says beside its frame. */
interface CmdCall {
  /** `X-Hangar-Client`: the console page marks its own commands. */
  client: IncomingHttpHeaders[string];
  /** `X-Hangar-When-Paused`: `fail` refuses input at once while a person holds control. */
  whenPaused: IncomingHttpHeaders[string];
  connection?: object;
}

/**
 * One command's event stream, on a reply whose status and headers are set: one `data:` event per
 * intermediate result and one for the final outcome. A command still running after
 * `HEADERS_ALONE_AFTER_MS` has its headers sent on their own, and from then on a client that goes
 * away cancels it (one that went away before is found then). A command that answers at once (most
 * do) is written then and there: no promise, timer, listener or abort controller is made for it.
 */
class EventReply {
  /** Stopped when the client goes away. */
  private readonly gone = new Stop();
  private slow: NodeJS.Timeout | undefined;
  private onClose: (() => void) | undefined;

  constructor(
    private readonly res: HandWritten,
    private readonly route: CmdRoutesOptions,
    private readonly command: string,
  ) {}

  /** Runs the command and writes its events; what it returns settles once they are written. Never throws. */
  run(params: unknown, call: CmdCall): Promise<void> | undefined {
    let outcome: Outcome | Promise<Outcome>;
    try {
      outcome = this.route.registry.runNow(this.command, params, {
        signal: this.gone,
        // The console page marks its own commands, so the timeline tells a person's from the agent's.
        transport: call.client === "console" ? "console" : "http",
        connection: call.connection,
        // While a person holds control: queue until the hand-back (default) or fail at once with `paused`.
        whenPaused: call.whenPaused === "fail" ? "fail" : "queue",
        emit: (content) => this.write({ success: true, content }),
      });
    } catch (err) {
      this.failed(err);
      return undefined;
    }
    if (!isPromise(outcome)) {
      this.finish(outcome);
      return undefined;
    }
    this.slow = setTimeout(headersDue, HEADERS_ALONE_AFTER_MS, this);
    return outcome.then(
      (done) => this.finish(done),
      (err) => this.failed(err),
    );
  }

  /** The command is still running: its headers go now, and its client is watched. */
  stillRunning() {
    const res = this.res;
    if (res.destroyed) return this.clientGone();
    res.flushHeaders();
    this.onClose = () => this.clientGone();
    res.on("close", this.onClose);
  }

  private clientGone() {
    if (!this.res.writableFinished) this.gone.stop(undefined);
  }

  private finish(outcome: Outcome) {
    try {
      if (!this.res.destroyed) this.end(outcome);
      this.release();
    } catch (err) {
      this.failed(err);
    }
  }

  private failed(err: unknown) {
    this.route.log.error({ err, command: this.command }, "writing the reply failed");
    this.res.destroy();
    this.release();
  }

  private release() {
    clearTimeout(this.slow);
    if (this.onClose) this.res.off("close", this.onClose);
  }

  /** An intermediate result (a streamed `run_command`'s output). */
  private write(event: unknown) {
    const res = this.res;
    if (res.writableEnded || res.destroyed) return;
    res.write(`data: ${JSON.stringify(event)}\n\n`);
    if (res.writableLength > STREAM_BACKLOG_LIMIT) {
      this.gone.stop(
        new CommandError("cancelled", "Command cancelled: the client stopped reading its output"),
      );
    }
  }

  private end(outcome: Outcome) {
    const res = this.res;
    // Most events hold no bytes: one text, one write.
    const text = cmdEventText(outcome, this.route.spread);
    if (text !== undefined) {
      res.end(text);
      return;
    }
    const held: HeldEncodings = [];
    const pieces = cmdEventBytes(outcome, this.route.spread, held);
    res.cork();
    for (const part of pieces) res.write(part);
    // The event's pieces include the bytes' base64 buffers: reusable once the socket has them.
    res.end(() => releaseEncodings(held));
    res.uncork();
  }
}

function headersDue(reply: EventReply) {
  reply.stillRunning();
}
