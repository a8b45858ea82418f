/**
 * `WS /ws`, cua's WebSocket protocol: one JSON text frame `{"command", "params"}` per command and
 * exactly one reply frame per received frame, in order, with no ids (clients match replies by
 * order). A connection handles its frames strictly one after another; separate connections run
 * concurrently. Replies use the cua shape `{"success": true, ...result}`. A bad frame gets an error
 * reply and the socket stays open.
 *
 * `authenticate` is the transport's handshake, not a command: in cloud mode the first frame must be
 * `{"command": "authenticate", "params": {"api_key", "container_name"}}` within a deadline, else the
 * socket is closed; in local mode the frame is simply answered with success.
 */

import type { Duplex } from "node:stream";
import type { MiddlewareHandler } from "hono";
import type { WebSocket } from "ws";
import { upgradeWebSocket } from "../../../common/lazy-node-server.js";
import { type Logger, silentLogger } from "../../../common/logger.js";
import { refuseHalfUpgrade } from "../../../common/ws-server.js";
import { AUTH_MESSAGES, type Authenticator, clientAddress } from "../../auth/index.js";
import { parseCommandFrame } from "../../core/frame.js";
import { cuaReply } from "../../core/outcome.js";
import type { CommandRegistry } from "../../core/registry.js";
import type { ComputerEnv } from "../../http/env.js";
import { jsonBytes } from "../../http/json-pieces.js";

export interface WsTransportOptions {
  registry: CommandRegistry;
  /** Cloud mode: the handshake checks credentials with it. Absent: local mode, no auth. */
  authenticator?: Authenticator;
  /** A cloud socket that has not authenticated after this long is closed (default 10 s). */
  authDeadlineMs?: number;
  /** A silent peer is dropped after two ping intervals (default 20 s). */
  pingIntervalMs?: number;
  log?: Logger;
}

type Reply = Record<string, unknown>;

const AUTH_SUCCESS: Reply = { success: true, message: "Authentication successful" };
/** Frames read ahead while one is being handled; beyond it the socket stops reading. */
const READ_AHEAD = 4;
const NORMAL_CLOSURE = 1000;
const POLICY_VIOLATION = 1008;

export function wsTransport(options: WsTransportOptions): MiddlewareHandler<ComputerEnv> {
  const upgrade = upgradeWebSocket((c) => {
    let session: WsSession | undefined;
    const address = clientAddress(c);
    const connection = c.env.incoming.socket;
    return {
      onOpen: (_event, ws) => {
        session = new WsSession(ws.raw as WebSocket, connection, address, options);
      },
      onMessage: (event) => session?.receive(event.data as string | ArrayBuffer),
      onClose: () => session?.end(),
      onError: () => session?.end(),
    };
  }) as MiddlewareHandler<ComputerEnv>;
  return async (c, next) => refuseHalfUpgrade(c) ?? upgrade(c, next);
}

class WsSession {
  private queue: Promise<void> = Promise.resolve();
  private queued = 0;
  private authenticated: boolean;
  private ended = false;
  private alive = true;
  private readonly gone = new AbortController();
  private deadline?: NodeJS.Timeout;
  private stopCounting = () => {};
  private readonly ping: NodeJS.Timeout;
  private readonly log: Logger;

  constructor(
    private readonly socket: WebSocket,
    connection: Duplex,
    private readonly address: string,
    private readonly options: WsTransportOptions,
  ) {
    this.log = options.log ?? silentLogger;
    this.authenticated = !options.authenticator;
    if (!this.authenticated) {
      this.stopCounting = limitUnauthenticatedBytes(connection, () => {
        this.log.warn({ address }, "websocket closed: too much data before authentication");
        this.end();
      });
      const ms = options.authDeadlineMs ?? 10_000;
      this.deadline = setTimeout(() => {
        if (this.authenticated || this.ended) return;
        this.log.warn({ address }, "websocket closed: no authentication before the deadline");
        void this.sendThenClose(
          { success: false, error: `Authentication timed out: send authenticate within ${ms / 1000} s` },
          POLICY_VIOLATION,
        );
      }, ms);
    }
    socket.on("pong", () => {
      this.alive = true;
    });
    this.ping = setInterval(() => {
      if (!this.alive) return socket.terminate();
      this.alive = false;
      socket.ping();
    }, options.pingIntervalMs ?? 20_000);
  }

  /** Queues a frame; frames are answered strictly in arrival order. */
  receive(data: string | ArrayBuffer) {
    this.queued++;
    if (this.queued >= READ_AHEAD && !this.socket.isPaused) this.socket.pause();
    this.queue = this.queue
      .then(() => this.handle(data))
      .catch((err) => this.log.error({ err, address: this.address }, "websocket reply failed"))
      .finally(() => {
        this.queued--;
        if (this.queued < READ_AHEAD && this.socket.isPaused) this.socket.resume();
      });
  }

  end() {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.deadline);
    this.stopCounting();
    clearInterval(this.ping);
    this.gone.abort();
  }

  private async handle(data: string | ArrayBuffer) {
    if (this.ended) return;
    let reply: Reply | undefined;
    try {
      if (!this.authenticated) return await this.handshake(data);
      reply = await this.answer(data);
    } catch (err) {
      this.log.error({ err, address: this.address }, "websocket frame failed");
      reply = { success: false, error: "Internal error while handling the message", code: "internal" };
    }
    if (reply) await this.send(reply);
  }

  /** The reference's first-frame handshake (§6.3): any failure is answered, then the socket closes. */
  private async handshake(data: string | ArrayBuffer) {
    const frame = typeof data === "string" ? parseFrame(data) : undefined;
    if (!frame || "error" in frame)
      return this.sendThenClose({ success: false, error: AUTH_MESSAGES.failed });
    if (frame.command !== "authenticate") {
      return this.sendThenClose({ success: false, error: "First message must be authentication" });
    }
    const result = await this.authenticate(frame.params);
    if (!result.ok) return;
    clearTimeout(this.deadline);
    this.stopCounting();
    this.authenticated = true;
    await this.send(AUTH_SUCCESS);
  }

  /** The reply to a frame, or undefined when it was already answered (a refused authenticate). */
  private async answer(data: string | ArrayBuffer): Promise<Reply | undefined> {
    if (typeof data !== "string") {
      return invalid("Binary frames are not supported: send each command as a JSON text frame");
    }
    const frame = parseFrame(data);
    if ("error" in frame) return invalid(frame.error);
    if (frame.command === "authenticate") {
      if (!this.options.authenticator) return AUTH_SUCCESS;
      return (await this.authenticate(frame.params)).ok ? AUTH_SUCCESS : undefined;
    }
    const outcome = await this.options.registry.run(frame.command, frame.params, {
      signal: this.gone.signal,
      transport: "ws",
      connection: this,
    });
    return cuaReply(outcome);
  }

  /** Checks an authenticate frame's credentials; a refusal is answered and closes the socket. */
  private async authenticate(params: unknown): Promise<{ ok: boolean }> {
    const p = (typeof params === "object" && params !== null ? params : {}) as Record<string, unknown>;
    const text = (value: unknown) => (typeof value === "string" ? value : undefined);
    const result = await this.options.authenticator!.check(
      { apiKey: text(p.api_key), containerName: text(p.container_name) },
      this.address,
      "key-first",
    );
    if (!result.ok) {
      await this.sendThenClose(
        { success: false, error: result.detail },
        result.status === 429 ? POLICY_VIOLATION : NORMAL_CLOSURE,
      );
    }
    return result;
  }

  private send(reply: Reply): Promise<void> {
    if (this.ended || this.socket.readyState !== this.socket.OPEN) return Promise.resolve();
    let text: Buffer;
    try {
      // The bytes of the result are written as base64 into the frame, without a string of them.
      text = jsonBytes(reply);
    } catch (err) {
      this.log.error({ err, address: this.address }, "a reply could not be serialized");
      text = jsonBytes({
        success: false,
        error: "The result could not be encoded as JSON",
        code: "internal",
      });
    }
    // The JSON is built as UTF-8 bytes; it still goes out as a text frame.
    return new Promise((resolve) => this.socket.send(text, { binary: false }, () => resolve()));
  }

  private async sendThenClose(reply: Reply, code = NORMAL_CLOSURE) {
    await this.send(reply);
    this.end();
    this.socket.close(code);
  }
}

/**
 * Bytes a peer may send before it has authenticated (its `authenticate` frame is far smaller): the
 * message limit of authenticated sockets (64 MiB) must not let strangers make the server buffer that.
 */
export const UNAUTHENTICATED_BYTES = 16 * 1024;

/** Destroys `connection` once more than `UNAUTHENTICATED_BYTES` have arrived; returns the function that stops counting. */
function limitUnauthenticatedBytes(connection: Duplex, onExceeded: () => void): () => void {
  let received = 0;
  const count = (chunk: Buffer) => {
    received += chunk.length;
    if (received <= UNAUTHENTICATED_BYTES) return;
    connection.off("data", count);
    onExceeded();
    connection.destroy();
  };
  connection.on("data", count);
  return () => connection.off("data", count);
}

type Frame = { command: string; params: unknown } | { error: string };

function parseFrame(text: string): Frame {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { error: `Invalid JSON: ${(err as Error).message}` };
  }
  return parseCommandFrame(value, "message");
}

function invalid(error: string): Reply {
  return { success: false, error, code: "invalid_params" };
}
