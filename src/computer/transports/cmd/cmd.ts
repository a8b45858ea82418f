/**
 * `POST /cmd`: one command per request, answered as Server-Sent Events: the headers (together with
 * the reply when it is quick), one `data:` event per intermediate result (a streamed `run_command`)
 * and one for the outcome, in cua's framing (the result in `content` and, unless `--no-spread`, its
 * fields beside it). Without Node's request and response (`app.request()`), the same runs in memory.
 */
import { type Context, Hono } from "hono";
import { CommandError } from "../../../common/errors.js";
import type { Logger } from "../../../common/logger.js";
import type { CommandRegistry } from "../../core/registry.js";
import { readCommandFrame } from "../../http/body.js";
import { eventStream } from "../../http/by-hand.js";
import type { ComputerEnv } from "../../http/env.js";
import { type HeldEncodings, releaseEncodings } from "../../http/json-pieces.js";
import { cmdEventBytes, eventLength } from "./cmd-event.js";

export interface CmdRoutesOptions {
  registry: CommandRegistry;
  log: Logger;
  /** Copy a result's fields beside `content` (cua's clients read them there). */
  spread: boolean;
  bodyLimitBytes: number;
}

/** A command still running after this long has its response headers sent before its reply. */
const HEADERS_ALONE_AFTER_MS = 20;
/** A reply of at most this many bytes is joined and written in one piece. */
const ONE_WRITE_BYTES = 16 * 1024;
/** A streaming client this far behind (bytes not yet sent) is treated as gone: its command is cancelled. */
const STREAM_BACKLOG_LIMIT = 64 * 1024 * 1024;

export function cmdRoutes({ registry, log, spread, bodyLimitBytes }: CmdRoutesOptions) {
  const routes = new Hono<ComputerEnv>();
  const takesBytes = (command: string, param: string) => registry.takesBytes(command, param);
  routes.post("/", async (c) => {
    const frame = await readCommandFrame(c, bodyLimitBytes, takesBytes);
    if (frame instanceof Response) return frame;
    if (!registry.resolve(frame.command)) {
      return c.json({ detail: registry.unknownCommandMessage(frame.command) }, 400);
    }
    return runAsEventStream(c, registry, frame.command, frame.params, spread, log);
  });
  return routes;
}

/**
 * Writes the headers (at once unless the reply is quick), then one `data:` event per intermediate
 * result and one for the final outcome. A client that goes away aborts the command.
 */
async function runAsEventStream(
  c: Context<ComputerEnv>,
  registry: CommandRegistry,
  command: string,
  params: unknown,
  spread: boolean,
  log: Logger,
) {
  // The headers are decided at the end for a quick reply: then it says its length, and leaves whole.
  const reply = eventStream(c, { deferHead: true });
  const { res } = reply;
  // A slower command has its headers sent on their own, so the client knows it is under way.
  const headersDue = setTimeout(() => {
    reply.head();
    res.flushHeaders();
  }, HEADERS_ALONE_AFTER_MS);

  const gone = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) gone.abort();
  };
  res.once("close", onClose);
  const write = (event: unknown) => {
    if (res.writableEnded || res.destroyed) return;
    reply.head();
    res.write(`data: ${JSON.stringify(event)}\n\n`);
    if (res.writableLength > STREAM_BACKLOG_LIMIT && !gone.signal.aborted) {
      gone.abort(new CommandError("cancelled", "Command cancelled: the client stopped reading its output"));
    }
  };
  // Node's parsed headers where there are some: c.req.header() would build a whole Headers object.
  const incoming = c.env?.incoming;
  const client = incoming ? incoming.headers["x-hangar-client"] : c.req.header("x-hangar-client");
  const whenPaused = incoming
    ? incoming.headers["x-hangar-when-paused"]
    : c.req.header("x-hangar-when-paused");
  try {
    const outcome = await registry.run(command, params, {
      signal: gone.signal,
      // The console page marks its own commands, so the timeline tells a person's from the agent's.
      transport: client === "console" ? "console" : "http",
      connection: incoming?.socket,
      // While a person holds control: queue until the hand-back (default) or fail at once with `paused`.
      whenPaused: whenPaused === "fail" ? "fail" : "queue",
      emit: (content) => write({ success: true, content }),
    });
    if (!res.destroyed) {
      const held: HeldEncodings = [];
      const pieces = cmdEventBytes(outcome, spread, held);
      const length = eventLength(pieces);
      // Nothing sent yet: the whole reply goes with its length, without chunked framing.
      reply.head({ "content-length": length });
      if (length <= ONE_WRITE_BYTES) {
        res.end(pieces.length === 1 ? pieces[0] : Buffer.concat(pieces, length));
        releaseEncodings(held);
      } else {
        res.cork();
        for (const part of pieces) res.write(part);
        // The event's pieces include the bytes' base64 buffers: reusable once the socket has them.
        res.end(() => releaseEncodings(held));
        res.uncork();
      }
    }
  } catch (err) {
    log.error({ err, command }, "writing the reply failed");
    res.destroy();
  } finally {
    clearTimeout(headersDue);
    res.off("close", onClose);
  }
  return reply.done();
}
