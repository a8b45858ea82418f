/**
 * The PTY routes of cua's protocol (§11): `POST /pty`, `GET`/`DELETE /pty/{pid}`,
 * `POST /pty/{pid}/stdin` (base64), `POST /pty/{pid}/resize`, `GET /pty/{pid}/stream` (SSE) and
 * `WS /pty/{pid}/ws`. Mounted under the app's `auth` middleware, so cloud mode covers them; the
 * auth middleware reads a WebSocket upgrade's credentials from the query parameters `api_key` and
 * `container_name`, as cua's Python `PtyInterface` sends them.
 */
import { existsSync, statSync } from "node:fs";
import { type Context, Hono } from "hono";
import type { WSContext } from "hono/ws";
import { z } from "zod";
import { upgradeWebSocket } from "../../../common/lazy-node-server.js";
import { type Logger, silentLogger } from "../../../common/logger.js";
import { refuseHalfUpgrade } from "../../../common/ws-server.js";
import { expandPath } from "../../../os/paths.js";
import { describeZodError } from "../../core/param-messages.js";
import { readJsonBody } from "../../http/body.js";
import { EVENT_STREAM_HEADERS } from "../../http/by-hand.js";
import type { ComputerEnv } from "../../http/env.js";
import type { PtyEvent, PtySession, PtySessions } from "./pty-sessions.js";

const size = z.number().int().min(1).max(1000);
export const startBody = z.object({
  command: z.string().max(100_000).nullish(),
  cols: size.default(80),
  rows: size.default(24),
  cwd: z.string().min(1).nullish(),
  envs: z.record(z.string(), z.string()).nullish(),
});
export const stdinBody = z.object({
  data: z
    .string()
    .max(16 * 1024 * 1024)
    .regex(/^[A-Za-z0-9+/]*={0,2}$/, "must be base64"),
});
/** What an SSE stream may hold for a client before it counts as lagging. */
const SSE_QUEUE_BYTES = 64 * 1024;
export const resizeBody = z.object({ cols: size.default(80), rows: size.default(24) });
const socketFrame = z.discriminatedUnion("type", [
  z.object({ type: z.literal("stdin"), data: stdinBody.shape.data }),
  z.object({ type: z.literal("resize"), cols: size.default(80), rows: size.default(24) }),
  z.object({ type: z.literal("disconnect") }),
]);

/** The wire form of a session event: output bytes in base64. */
export function eventJson(event: PtyEvent): string {
  return JSON.stringify(
    event.type === "output" ? { type: "output", data: event.data.toString("base64") } : event,
  );
}

/**
 * @param bodyLimitBytes the largest request body (counted while it streams in); default 64 MiB
 */
export function ptyRoutes(
  sessions: PtySessions,
  log: Logger = silentLogger,
  bodyLimitBytes = 64 * 1024 * 1024,
) {
  const routes = new Hono<ComputerEnv>();
  const notFound = (c: Context, pid: string) => c.json({ detail: `PTY session ${pid} not found` }, 404);
  const lookup = (c: Context): PtySession | undefined => {
    const pid = Number(c.req.param("pid"));
    return Number.isSafeInteger(pid) ? sessions.get(pid) : undefined;
  };
  /** The JSON body parsed by `schema` (an empty body is `{}`), or the 400/413 reply that refuses it. */
  const readParams = async <T extends z.ZodTypeAny>(
    c: Context<ComputerEnv>,
    schema: T,
  ): Promise<{ params: z.output<T> } | { refusal: Response }> => {
    const read = await readJsonBody(c.env.incoming, bodyLimitBytes, {});
    if (!read.ok) {
      return { refusal: c.json({ detail: read.detail }, read.status) };
    }
    const parsed = schema.safeParse(read.value);
    if (!parsed.success) return { refusal: c.json({ detail: describeZodError(parsed.error) }, 400) };
    return { params: parsed.data };
  };

  routes.post("/", async (c) => {
    const read = await readParams(c, startBody);
    if ("refusal" in read) return read.refusal;
    const p = read.params;
    const cwd = p.cwd ? expandPath(p.cwd) : undefined;
    if (cwd && !(existsSync(cwd) && statSync(cwd).isDirectory())) {
      return c.json({ detail: `Working directory does not exist: ${p.cwd}` }, 400);
    }
    try {
      const session = sessions.start({
        command: p.command ?? undefined,
        cols: p.cols,
        rows: p.rows,
        cwd,
        envs: p.envs ?? undefined,
      });
      log.info({ pid: session.pid }, "pty started");
      return c.json(session.info());
    } catch (err) {
      return c.json({ detail: `Cannot start the terminal: ${(err as Error).message}` }, 503);
    }
  });

  routes.get("/:pid", (c) => {
    const session = lookup(c);
    return session ? c.json(session.info()) : notFound(c, c.req.param("pid"));
  });

  routes.delete("/:pid", (c) => {
    const pid = Number(c.req.param("pid"));
    if (!Number.isSafeInteger(pid) || !sessions.kill(pid)) return notFound(c, c.req.param("pid"));
    return c.json({ killed: true });
  });

  routes.post("/:pid/stdin", async (c) => {
    const session = lookup(c);
    if (!session) return notFound(c, c.req.param("pid"));
    const read = await readParams(c, stdinBody);
    if ("refusal" in read) return read.refusal;
    if (session.exited) return c.json({ detail: `PTY session ${session.pid} has exited` }, 409);
    session.write(Buffer.from(read.params.data, "base64"));
    return c.json({ ok: true });
  });

  routes.post("/:pid/resize", async (c) => {
    const session = lookup(c);
    if (!session) return notFound(c, c.req.param("pid"));
    const read = await readParams(c, resizeBody);
    if ("refusal" in read) return read.refusal;
    session.resize(read.params.cols, read.params.rows);
    return c.json({ ok: true });
  });

  routes.get("/:pid/stream", (c) => {
    const session = lookup(c);
    if (!session) return notFound(c, c.req.param("pid"));
    const encoder = new TextEncoder();
    let unsubscribe = () => {};
    const body = new ReadableStream<Uint8Array>(
      {
        start(controller) {
          unsubscribe = session.subscribe({
            send: (event) => {
              controller.enqueue(encoder.encode(`data: ${eventJson(event)}\n\n`));
              if (event.type === "exit") queueMicrotask(() => controller.close());
            },
            queuedBytes: () => SSE_QUEUE_BYTES - (controller.desiredSize ?? 0),
          });
        },
        cancel() {
          unsubscribe();
        },
      },
      new ByteLengthQueuingStrategy({ highWaterMark: SSE_QUEUE_BYTES }),
    );
    return new Response(body, { headers: EVENT_STREAM_HEADERS });
  });

  routes.get(
    "/:pid/ws",
    async (c, next) => refuseHalfUpgrade(c) ?? (lookup(c) ? next() : notFound(c, c.req.param("pid"))),
    upgradeWebSocket((c) => {
      const session = lookup(c)!;
      let unsubscribe = () => {};
      const onFrame = (raw: unknown, ws: WSContext) => {
        let frame: z.infer<typeof socketFrame>;
        try {
          frame = socketFrame.parse(JSON.parse(String(raw)));
        } catch {
          return; // the reference ignores frames it cannot read
        }
        if (frame.type === "stdin") session.write(Buffer.from(frame.data, "base64"));
        else if (frame.type === "resize") session.resize(frame.cols, frame.rows);
        else ws.close(1000, "disconnect");
      };
      return {
        onOpen: (_event, ws) => {
          unsubscribe = session.subscribe({
            send: (event) => {
              if (ws.readyState !== 1) return;
              ws.send(eventJson(event));
              if (event.type === "exit") ws.close(1000, "exited");
            },
            queuedBytes: () => (ws.raw as { bufferedAmount?: number } | undefined)?.bufferedAmount ?? 0,
          });
        },
        onMessage: (event, ws) => onFrame(event.data, ws),
        onClose: () => unsubscribe(),
        onError: () => unsubscribe(),
      };
    }),
  );

  return routes;
}
