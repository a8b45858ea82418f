/**
 * OSWorld's streaming routes (xlang-ai/osworld-server's `STREAMING_PROTOCOL.md`), on the controller's
 * listener:
 *
 * - `WS /ws/h264?fps&bitrate_kbps&gop&session_id`: a `session_started` JSON text frame, then binary
 *   frames of MPEG-TS carrying H.264 (libx264 `ultrafast`, `zerolatency`, baseline profile);
 *   `stream_error` when the encoder fails for good, `error` when it could not start.
 * - `WS /ws/control?session_id`: `control_ready`, then `{"type": "action", "action_id", "action"}`
 *   (answered `action_ack`, then `action_result`), `{"type": "ping"}` (`pong`), `{"type": "close"}`;
 *   anything else is answered `error`.
 * - `GET /live/h264.mp4?fps&bitrate_kbps&gop&session_id`: the same video as fragmented MP4.
 *
 * The parameters are read as upstream reads them (Python's `float()`/`int()`, a value that does not
 * parse is the default) and clamped to its ranges; `session_id` is the client's name for its session
 * (made when not given), echoed in every message. Upstream starts an ffmpeg per connection that
 * grabs the screen at the frame rate; here the frames come from the server's own capture (DAMAGE:
 * a frame when the screen changed; while it is still, its picture again five times a second, as
 * players wait for frames) and connections with the same parameters share one encoder
 * (desktop/live/live-streams.ts).
 */
import { randomUUID } from "node:crypto";
import { Hono } from "hono";
import type { WebSocket } from "ws";
import { upgradeWebSocket } from "../../../common/lazy-node-server.js";
import type { LiveStreams } from "../../../desktop/live/live-streams.js";
import type { ComputerEnv } from "../../http/env.js";
import { liveMp4, PLAYER_REPEAT_MS } from "../../http/live-mp4.js";
import type { ExecuteDeps } from "./execute.js";
import { runStreamAction } from "./stream-actions.js";

export interface StreamingDeps extends ExecuteDeps {
  streams: LiveStreams;
}

/** A viewer of `/ws/h264` holding this much unsent has fallen behind: its stream ends. */
const BACKLOG_BYTES = 8 * 1024 * 1024;
/** The longest `session_id` taken; it is only echoed back. */
const SESSION_ID_MAX = 256;

/** Python's `float(value)`: decimal and exponent forms, `inf`, `nan`; undefined when it does not parse. */
function pythonFloat(value: string): number | undefined {
  const text = value.trim().replaceAll("_", "");
  if (/^[+-]?(inf|infinity)$/i.test(text)) return text.startsWith("-") ? -Infinity : Infinity;
  if (/^[+-]?nan$/i.test(text)) return Number.NaN;
  return /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(text) ? Number(text) : undefined;
}

/** Python's `int(value)`: an optionally signed whole number; undefined when it does not parse. */
function pythonInt(value: string): number | undefined {
  const text = value.trim();
  return /^[+-]?\d+(_\d+)*$/.test(text) ? Number(text.replaceAll("_", "")) : undefined;
}

/** `max(minimum, min(value, maximum))` as Python computes it (a NaN ends at the minimum). */
function clamp(value: number, minimum: number, maximum: number): number {
  return Number.isNaN(value) ? minimum : Math.max(minimum, Math.min(value, maximum));
}

/** Python's `round()`: halves to the even neighbour. */
function roundHalfEven(value: number): number {
  const floor = Math.floor(value);
  const diff = value - floor;
  if (diff !== 0.5) return Math.round(value);
  return floor % 2 === 0 ? floor : floor + 1;
}

export interface StreamParams {
  sessionId: string;
  fps: number;
  bitrateKbps: number;
  gop: number;
}

/** The query of `/ws/h264` and `/live/h264.mp4`, read and clamped as upstream does; a string when refused. */
export function streamParams(query: Record<string, string | undefined>): StreamParams | string {
  const sessionId = sessionOf(query);
  if (typeof sessionId !== "string") return sessionId.error;
  const given = (name: string) => query[name];
  const fps = clamp(given("fps") === undefined ? 12 : (pythonFloat(given("fps")!) ?? 12), 1, 60);
  const bitrateKbps = clamp(
    given("bitrate_kbps") === undefined ? 2000 : (pythonInt(given("bitrate_kbps")!) ?? 2000),
    250,
    12000,
  );
  const defaultGop = Math.max(1, roundHalfEven(fps));
  const gop = clamp(
    given("gop") === undefined ? defaultGop : (pythonInt(given("gop")!) ?? defaultGop),
    1,
    240,
  );
  return { sessionId, fps, bitrateKbps, gop };
}

function sessionOf(query: Record<string, string | undefined>): string | { error: string } {
  const given = query.session_id;
  if (!given) return randomUUID().replaceAll("-", "");
  if (given.length > SESSION_ID_MAX || /[\p{Cc}]/u.test(given)) {
    return { error: `session_id: at most ${SESSION_ID_MAX} printable characters` };
  }
  return given;
}

/** The shared encoder's settings for these parameters: `/ws/h264` and `/live/h264.mp4` share it. */
function encoderSettings(params: StreamParams) {
  return {
    // ffmpeg's frame rate: upstream's `max(1, min(int(round(fps)), 60))`.
    fps: clamp(roundHalfEven(params.fps), 1, 60),
    rate: { kbps: params.bitrateKbps },
    gop: params.gop,
    preset: "ultrafast" as const,
    profile: "baseline" as const,
    cursor: true,
    // Players wait for frames; upstream's encoder grabs the screen at the frame rate.
    repeatStillMs: PLAYER_REPEAT_MS,
    mpegts: true,
  };
}

const now = () => Date.now() / 1000;

export function streamingRoutes(deps: StreamingDeps) {
  const routes = new Hono<ComputerEnv>();

  routes.get(
    "/ws/h264",
    upgradeWebSocket((c) => {
      const params = streamParams(c.req.query());
      let close: () => void = () => undefined;
      return {
        onOpen: (_event, ws) => {
          close = streamTs(ws.raw as WebSocket, deps.streams, params);
        },
        onClose: () => close(),
        onError: () => close(),
      };
    }),
  );

  routes.get(
    "/ws/control",
    upgradeWebSocket((c) => {
      const session = sessionOf(c.req.query());
      let socket: WebSocket | undefined;
      const send = (message: Record<string, unknown>) => {
        if (socket?.readyState === socket?.OPEN) socket?.send(JSON.stringify(message));
      };
      return {
        onOpen: (_event, ws) => {
          socket = ws.raw as WebSocket;
          if (typeof session !== "string") {
            send({ type: "error", timestamp: now(), error: session.error });
            return socket.close(1008, "bad session_id");
          }
          send({ type: "control_ready", session_id: session, timestamp: now() });
        },
        onMessage: (event) => {
          if (typeof session !== "string" || !socket) return;
          void controlMessage(deps, session, String(event.data), send, () => socket?.close());
        },
      };
    }),
  );

  routes.get("/live/h264.mp4", (c) => {
    const params = streamParams(c.req.query());
    if (typeof params === "string") return c.json({ error: params }, 400);
    return liveMp4(c, deps.streams, encoderSettings(params));
  });

  return routes;
}

/** Sends the MPEG-TS stream on `socket`; returns what stops it. */
function streamTs(socket: WebSocket, streams: LiveStreams, params: StreamParams | string): () => void {
  const send = (message: Record<string, unknown>) => {
    if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(message));
  };
  if (typeof params === "string") {
    send({ type: "error", timestamp: now(), error: params });
    socket.close(1008, "bad parameters");
    return () => undefined;
  }
  const { sessionId } = params;
  let started = false;
  const watched = streams.watch(encoderSettings(params), {
    start: (start) => {
      if (started) return;
      started = true;
      send({
        type: "session_started",
        session_id: sessionId,
        timestamp: now(),
        codec: "h264",
        container: "mpegts",
        fps: params.fps,
        bitrate_kbps: params.bitrateKbps,
        gop: params.gop,
        width: start.screen.width,
        height: start.screen.height,
      });
    },
    packet: () => undefined,
    ts: (bytes) => {
      if (!started || socket.readyState !== socket.OPEN) return;
      if (socket.bufferedAmount > BACKLOG_BYTES) {
        send({
          type: "stream_error",
          session_id: sessionId,
          timestamp: now(),
          error: "The client fell behind",
        });
        return stop();
      }
      socket.send(bytes, { binary: true });
    },
    end: (reason) => {
      send({
        type: started ? "stream_error" : "error",
        session_id: sessionId,
        timestamp: now(),
        error: started ? reason : `Failed to start H.264 stream: ${reason}`,
      });
      socket.close();
    },
  });
  const stop = () => {
    watched.close();
    if (socket.readyState === socket.OPEN) socket.close();
  };
  return stop;
}

/** One message of `/ws/control`. */
async function controlMessage(
  deps: StreamingDeps,
  session: string,
  raw: string,
  send: (message: Record<string, unknown>) => void,
  close: () => void,
) {
  let message: Record<string, unknown>;
  try {
    const parsed = JSON.parse(raw) as unknown;
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
      throw new Error("not an object");
    message = parsed as Record<string, unknown>;
  } catch (err) {
    return send({
      type: "error",
      session_id: session,
      timestamp: now(),
      error: `Invalid JSON message: ${(err as Error).message}`,
    });
  }
  if (message.type === "ping") return send({ type: "pong", session_id: session, timestamp: now() });
  if (message.type === "close") return close();
  if (message.type !== "action") {
    return send({
      type: "error",
      session_id: session,
      timestamp: now(),
      error: `Unsupported message type: ${String(message.type)}`,
    });
  }
  const actionId = message.action_id ? String(message.action_id) : randomUUID().replaceAll("-", "");
  send({
    type: "action_ack",
    session_id: session,
    action_id: actionId,
    timestamp: now(),
    status: "received",
  });
  const startedAt = now();
  try {
    const outcome = await runStreamAction(deps, message.action);
    const completedAt = now();
    send({
      type: "action_result",
      session_id: session,
      action_id: actionId,
      timestamp: completedAt,
      status: outcome.status,
      started_at: startedAt,
      completed_at: completedAt,
      result: outcome.result,
    });
  } catch (err) {
    send({
      type: "action_result",
      session_id: session,
      action_id: actionId,
      timestamp: now(),
      status: "error",
      error: (err as Error).message,
    });
  }
}
