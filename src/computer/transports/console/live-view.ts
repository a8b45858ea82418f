/**
 * `WS /live`: the desktop as JPEG frames, pushed only when the screen changed, or as H.264. The
 * viewer's first text frame (and any later one) sets `{"quality", "width", "fps", "codec"}`. JPEG:
 * each picture is a binary frame, preceded by a text frame `{"type": "size", …}` when its size
 * changes. Nothing is captured while no viewer is connected; an unchanged screen is recognised without
 * encoding (the X11 backend hands out the same capture again), and a frame is skipped while the
 * socket still holds the previous one.
 *
 * `"codec": "h264"` (with `"audio": true` for the desktop's sound): the shared live stream
 * (desktop/live/live-streams.ts) instead. A text frame `{"type": "stream", video: {codec,
 * description, width, height}, audio?, screenWidth, screenHeight, generation}` says how to decode
 * (WebCodecs' configuration; `description` in base64), again after each restart of the encoder; each
 * binary frame is one packet: a flags byte (1: audio, 2: keyframe), its time in ms as a float64,
 * then the H.264 access unit (length-prefixed NAL units) or the AAC frame. A viewer whose socket
 * falls behind skips to the next keyframe. When the stream ends, `{"type": "stream_end", "error"}`,
 * and JPEG frames follow.
 *
 * Take control: `{"type": "control", "on": true}` takes the control lease (core/control.ts) for this
 * viewer: its `{"type": "input", "command", "params"}` frames then run as pointer and keyboard
 * commands through the registry, and every other client's input waits or fails with `paused` until
 * `{"type": "control", "on": false, "note"}` hands it back (the note answers `request_help`), or
 * the socket closes. Every viewer is sent `{"type": "control_state", held, by, since, help, mine}`
 * at the start and at each change. A view-only viewer (a share link) can do neither.
 */
import type { Context, MiddlewareHandler } from "hono";
import type { WebSocket } from "ws";
import { z } from "zod";
import type { CommandError } from "../../../common/errors.js";
import { upgradeWebSocket } from "../../../common/lazy-node-server.js";
import { type Logger, silentLogger } from "../../../common/logger.js";
import type { DesktopProvider, RawImage } from "../../../desktop/backend.js";
import type { LiveStreams, MediaPacket, StreamStart } from "../../../desktop/live/live-streams.js";
import { encodeCapture, targetSize, withCapture } from "../../../desktop/screenshot.js";
import type { ControlLease, Lease } from "../../core/control.js";
import type { Idleness } from "../../core/idleness.js";
import type { CommandRegistry } from "../../core/registry.js";
import type { ComputerEnv } from "../../http/env.js";

export interface LiveViewOptions {
  registry: CommandRegistry;
  desktop: DesktopProvider;
  control: ControlLease;
  /** The H.264 live streams (`"codec": "h264"`); without them only JPEG frames are sent. */
  streams?: LiveStreams;
  /** Told of each viewer while it is connected (a viewer keeps the desktop from counting as idle). */
  idleness?: Idleness;
  /** A share link's viewer: frames only, no control and no input (refused by the server). */
  viewOnly?: boolean;
  /** For a share link: whether this connection's link still holds (the socket closes when not). */
  allowed?: (c: Context) => () => boolean;
  log?: Logger;
}

/** How the console's person is named in `paused` replies and the timeline. */
const CONSOLE_PERSON = "a person in the console";

const viewerFrame = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("settings"),
    quality: z.number().int().min(10).max(95).default(70),
    width: z.number().int().min(160).max(7680).optional(),
    fps: z.number().min(1).max(60).default(25),
    codec: z.enum(["jpeg", "h264"]).default("jpeg"),
    audio: z.boolean().default(false),
  }),
  z.object({ type: z.literal("control"), on: z.boolean(), note: z.string().max(10_000).optional() }),
  z.object({
    type: z.literal("input"),
    command: z.string().min(1).max(100),
    params: z.record(z.string(), z.unknown()).default({}),
  }),
]);
type Settings = Extract<z.infer<typeof viewerFrame>, { type: "settings" }>;

/** How often a share link's viewer checks that its link still holds. */
const LINK_CHECK_MS = 500;
/** After this long without a change, the screen is looked at less often (a still screen costs ~0). */
const STILL_AFTER_MS = 1000;
const STILL_POLL_MS = 100;
/** With a backend that reports changes, a still screen is looked at when it changes or after this. */
const STILL_WAKE_MS = 5000;
/**
 * A viewer asking for at least this share of the screen's width gets the screen's own size: scaling
 * costs more server CPU than the encoding itself (bench/live.ts), and the browser scales for free.
 */
const NATIVE_ABOVE = 0.75;
/** A socket still holding more than this is behind: frames are skipped until it drains. */
const BACKLOG_BYTES = 256 * 1024;
/** The same for H.264: packets are skipped until the next keyframe once it is this far behind. */
const STREAM_BACKLOG_BYTES = 4 * 1024 * 1024;

/** The shared live stream's settings for a viewer's: one encoder for every viewer at that rate. */
export function consoleStreamSettings(fps: number, audio: boolean, width?: number) {
  return {
    fps,
    // The viewer's width: a browser showing the stream smaller than the screen is sent it smaller
    // (half the encoder's time at 1280 wide for a 1920 screen).
    maxWidth: width,
    rate: { crf: LIVE_CRF },
    // bench/live-h264.ts: an agent session's stream is 23 % of its JPEG frames' bytes with superfast,
    // 36 % with ultrafast.
    preset: "superfast" as const,
    gop: Math.round(fps * 2),
    cursor: true,
    repeatStillMs: Number.POSITIVE_INFINITY,
    mpegts: false,
    audio,
  };
}
/** x264's constant quality for the live stream: text stays sharp, a still screen costs nothing. */
const LIVE_CRF = 26;

export function liveView(options: LiveViewOptions): MiddlewareHandler<ComputerEnv> {
  return upgradeWebSocket((c) => {
    let viewer: Viewer | undefined;
    let leave: (() => void) | undefined;
    const allowed = options.allowed?.(c);
    const stop = () => {
      leave?.();
      viewer?.stop();
    };
    return {
      onOpen: (_event, ws) => {
        leave = options.idleness?.viewerJoined();
        viewer = new Viewer(ws.raw as WebSocket, options, allowed);
      },
      onMessage: (event) => viewer?.receive(event.data),
      onClose: stop,
      onError: stop,
    };
  }) as MiddlewareHandler<ComputerEnv>;
}

class Viewer {
  private settings: Settings = { type: "settings", quality: 70, fps: 25, codec: "jpeg", audio: false };
  /** The H.264 stream watched, while the viewer asked for one. */
  private stream: { close(): void } | undefined;
  /** Packets are skipped until a keyframe (the socket fell behind, or the stream just started). */
  private needKey = true;
  private ticking = false;
  private stopped = false;
  private timer?: NodeJS.Timeout;
  private lastRaw: RawImage | undefined;
  private lastFrame: Buffer | undefined;
  private lastSize = "";
  private lastChange = 0;
  private readonly log: Logger;
  private lease: Lease | undefined;
  private readonly unsubscribe: () => void;
  private readonly watch?: NodeJS.Timeout;

  constructor(
    private readonly socket: WebSocket,
    private readonly options: LiveViewOptions,
    allowed?: () => boolean,
  ) {
    this.log = options.log ?? silentLogger;
    socket.on("error", () => this.stop());
    if (allowed) {
      // A share link that expires or is revoked stops showing at once, not at the next visit.
      this.watch = setInterval(() => {
        if (allowed()) return;
        this.stop();
        socket.close(4403, "This share link has expired or was revoked");
      }, LINK_CHECK_MS);
    }
    this.unsubscribe = options.control.subscribe(() => this.sendControlState());
    this.sendControlState();
    this.schedule(0);
  }

  private sendControlState() {
    const { control } = this.options;
    this.reply({
      type: "control_state",
      ...control.state,
      mine: control.holds(this.lease),
    });
  }

  private controlFrame(on: boolean, note?: string) {
    const { control } = this.options;
    if (this.options.viewOnly) {
      return this.reply({
        type: "error",
        code: "view_only",
        error: "This is a view-only link: it cannot take control",
      });
    }
    try {
      if (on && !this.lease) this.lease = control.take(CONSOLE_PERSON);
      else if (!on) {
        control.handBack(this.lease, note);
        this.lease = undefined;
      }
      this.reply({ type: "control", on: this.lease !== undefined });
    } catch (err) {
      const { code, message } = err as CommandError;
      this.reply({ type: "error", code, error: message });
    }
  }

  receive(data: unknown) {
    if (typeof data !== "string") return this.reply({ type: "error", error: "Send JSON text frames" });
    let frame: z.infer<typeof viewerFrame>;
    try {
      const parsed = viewerFrame.safeParse(JSON.parse(data));
      if (!parsed.success) return this.reply({ type: "error", error: parsed.error.issues[0]?.message });
      frame = parsed.data;
    } catch {
      return this.reply({ type: "error", error: "Invalid JSON" });
    }
    if (frame.type === "settings") {
      this.settings = frame;
      this.lastRaw = undefined;
      this.lastFrame = undefined;
      this.lastSize = "";
      this.watchStream();
    } else if (frame.type === "control") {
      this.controlFrame(frame.on, frame.note);
    } else if (this.options.viewOnly) {
      this.reply({ type: "error", code: "view_only", error: "This is a view-only link: input is refused" });
    } else if (!this.lease) {
      this.reply({ type: "error", error: "Take control first" });
    } else if (!this.options.registry.resolve(frame.command)?.input) {
      this.reply({
        type: "error",
        error: `Not an input command: ${frame.command.slice(0, 100)} (the viewer sends pointer and keyboard commands)`,
      });
    } else {
      void this.options.registry
        .run(frame.command, frame.params, { transport: "live", holder: this.lease, whenPaused: "fail" })
        .then((outcome) => !outcome.success && this.reply({ type: "error", error: outcome.error }));
    }
  }

  /** Watches the H.264 stream the settings ask for, or goes back to JPEG frames. */
  private watchStream() {
    this.stream?.close();
    this.stream = undefined;
    if (this.settings.codec !== "h264") return this.schedule(0);
    const { streams } = this.options;
    if (!streams) {
      this.reply({ type: "stream_end", error: "This server has no H.264 stream; JPEG frames follow" });
      this.settings = { ...this.settings, codec: "jpeg" };
      return this.schedule(0);
    }
    clearTimeout(this.timer);
    this.needKey = true;
    const { fps, audio, width } = this.settings;
    const watched = streams.watch(consoleStreamSettings(fps, audio, width), {
      start: (start) => this.streamStart(start),
      packet: (packet) => this.streamPacket(packet),
      end: (reason) => {
        if (this.stream !== watched) return;
        this.stream = undefined;
        this.settings = { ...this.settings, codec: "jpeg" };
        this.reply({ type: "stream_end", error: reason });
        this.schedule(0);
      },
    });
    this.stream = watched;
  }

  private streamStart(start: StreamStart) {
    this.needKey = true;
    this.reply({
      type: "stream",
      video: { ...start.video, description: start.video.description.toString("base64") },
      ...(start.audio
        ? { audio: { ...start.audio, description: start.audio.description.toString("base64") } }
        : {}),
      screenWidth: start.screen.width,
      screenHeight: start.screen.height,
      generation: start.generation,
    });
  }

  private streamPacket(packet: MediaPacket) {
    if (this.socket.readyState !== this.socket.OPEN) return;
    if (this.socket.bufferedAmount > STREAM_BACKLOG_BYTES) {
      this.needKey = true;
      return;
    }
    if (this.needKey) {
      if (packet.kind !== "video" || !packet.key) return;
      this.needKey = false;
    }
    const head = Buffer.allocUnsafe(9);
    head[0] = (packet.kind === "audio" ? 1 : 0) | (packet.key ? 2 : 0);
    head.writeDoubleBE(packet.timestampMs, 1);
    this.socket.send(Buffer.concat([head, packet.data]), { binary: true });
  }

  stop() {
    if (this.stopped) return;
    this.stopped = true;
    this.stream?.close();
    this.stream = undefined;
    clearTimeout(this.timer);
    clearInterval(this.watch);
    this.unsubscribe();
    // A person who closed the console hands control back: the agents are not paused for ever.
    if (this.lease) {
      try {
        this.options.control.handBack(this.lease, "");
      } catch {
        // Already handed back.
      }
      this.lease = undefined;
    }
  }

  private schedule(ms: number) {
    clearTimeout(this.timer);
    if (this.stopped || this.stream) return;
    // A tick still running (waiting for a change) schedules the next one itself.
    this.timer = setTimeout(() => !this.ticking && void this.tick(), ms);
  }

  private async tick() {
    this.ticking = true;
    try {
      await this.tickNow();
    } finally {
      this.ticking = false;
    }
  }

  private async tickNow() {
    const started = performance.now();
    try {
      if (this.socket.bufferedAmount <= BACKLOG_BYTES) await this.sendFrame();
    } catch (err) {
      this.log.debug({ err }, "live view frame failed");
      this.reply({ type: "error", error: `No picture: ${(err as Error).message}` });
      // A missing display is not retried at the full frame rate.
      return this.schedule(1000);
    }
    const still = started - this.lastChange > STILL_AFTER_MS;
    const interval = still ? Math.max(STILL_POLL_MS, 1000 / this.settings.fps) : 1000 / this.settings.fps;
    const wait = Math.max(0, interval - (performance.now() - started));
    const backend = still ? await this.options.desktop().catch(() => undefined) : undefined;
    if (!backend?.waitForChange) return this.schedule(wait);
    // A still screen the backend watches (X DAMAGE): no capture until something changes.
    await backend.waitForChange(this.lastRaw, STILL_WAKE_MS);
    this.schedule(Math.max(0, 1000 / this.settings.fps - (performance.now() - started)));
  }

  private async sendFrame() {
    const backend = await this.options.desktop();
    const frame = await withCapture(backend, async (raw) => {
      // The X11 backend hands out the same object while nothing changed: nothing to encode.
      if (raw === this.lastRaw || this.stopped) return undefined;
      this.lastRaw = raw;
      this.lastChange = performance.now();
      const { width } = this.settings;
      const size = targetSize(raw.width, raw.height, {
        format: "jpeg",
        quality: this.settings.quality,
        maxWidth: width !== undefined && width < raw.width * NATIVE_ABOVE ? width : undefined,
      });
      return { raw, size, jpeg: await encodeCapture(raw, size, "jpeg", this.settings.quality) };
    });
    if (!frame) return;
    const { raw, size, jpeg } = frame;
    // Other backends capture afresh: an identical picture is not sent again.
    if (this.lastFrame?.equals(jpeg) || this.stopped || this.stream) return;
    this.lastFrame = jpeg;
    const sizeKey = `${size.width}x${size.height}/${raw.width}x${raw.height}`;
    if (sizeKey !== this.lastSize) {
      this.lastSize = sizeKey;
      this.reply({
        type: "size",
        width: size.width,
        height: size.height,
        screenWidth: raw.width,
        screenHeight: raw.height,
      });
    }
    this.socket.send(jpeg, { binary: true });
  }

  private reply(message: Record<string, unknown>) {
    if (this.socket.readyState === this.socket.OPEN) this.socket.send(JSON.stringify(message));
  }
}
