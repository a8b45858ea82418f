/**
 * OSWorld's streaming routes (xlang-ai/osworld-server's STREAMING_PROTOCOL.md) on `--osworld`, with
 * a client written from that document (upstream's Python helper lives in the OSWorld repository,
 * which is not at hand): `/ws/h264` sends `session_started` then MPEG-TS that ffprobe reads as
 * H.264 showing the desktop; its parameters are clamped as upstream's `coerce_stream_*` do;
 * `/ws/control` acts while the video streams (`action_ack`, `action_result`, `pong`, `error`), each
 * action a Hangar command in the activity timeline; `/live/h264.mp4` is the same video as fragmented
 * MP4; foreign origins are refused; nothing is left running.
 */
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { liveEncoders, SavedStream, untilLastFrameNear } from "../support/live-stream.js";
import { rawRequest } from "../support/raw-http.js";
import { near, pixelAt, probeVideo } from "../support/video.js";
import { type OsworldDesktop, startOsworldDesktop } from "./support.js";

let desk: OsworldDesktop;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hangar-osworld-stream-"));
  desk = await startOsworldDesktop({ width: 1024, height: 768 });
  await desk.run("xdotool", ["mousemove", "1000", "750"]);
  await desk.run("xsetroot", ["-solid", "#203040"]);
});
afterAll(async () => {
  await desk?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const wsBase = () => desk.base.replace(/^http/, "ws");

/** A client of the protocol: JSON text frames in `messages`, binary frames in `bytes`. */
class ProtocolSocket {
  readonly messages: any[] = [];
  readonly bytes: Buffer[] = [];
  private readonly waiters = new Set<() => void>();
  readonly closed: Promise<number>;

  constructor(readonly ws: WebSocket) {
    ws.on("message", (data: Buffer, isBinary) => {
      if (isBinary) this.bytes.push(Buffer.from(data));
      else this.messages.push(JSON.parse(data.toString()));
      for (const wake of this.waiters) wake();
    });
    this.closed = new Promise((resolve) => ws.once("close", (code) => resolve(code)));
  }

  static async open(path: string) {
    const socket = new ProtocolSocket(new WebSocket(`${wsBase()}${path}`));
    await once(socket.ws, "open");
    return socket;
  }

  send(message: unknown) {
    this.ws.send(typeof message === "string" ? message : JSON.stringify(message));
  }

  /** The first message after `from` that `match` accepts. */
  next(match: (m: any) => boolean, from = 0, timeoutMs = 20_000): Promise<any> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = this.messages.slice(from).find(match);
        if (!found) return;
        done();
        resolve(found);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no such message; got ${JSON.stringify(this.messages)}`));
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  byteCount() {
    return this.bytes.reduce((sum, b) => sum + b.length, 0);
  }

  close() {
    this.ws.close();
    return this.closed;
  }
}

/** One action on `/ws/control`: its ack and its result. */
async function act(control: ProtocolSocket, action: unknown, actionId: string) {
  const from = control.messages.length;
  control.send({ type: "action", action_id: actionId, action });
  const ack = await control.next((m) => m.type === "action_ack" && m.action_id === actionId, from);
  const result = await control.next((m) => m.type === "action_result" && m.action_id === actionId, from);
  return { ack, result };
}

const activity = async () =>
  ((await (await fetch(`${desk.server.url}/activity`)).json()) as { entries: any[] }).entries;

describe("WS /ws/h264", () => {
  it("sends session_started, then MPEG-TS that ffprobe reads as H.264 showing the desktop", async () => {
    const before = Date.now() / 1000;
    const socket = await ProtocolSocket.open("/ws/h264");
    const started = await socket.next(() => true);
    expect(started).toEqual({
      type: "session_started",
      session_id: expect.stringMatching(/^[0-9a-f]{32}$/),
      timestamp: expect.any(Number),
      codec: "h264",
      container: "mpegts",
      fps: 12,
      bitrate_kbps: 2000,
      gop: 12,
      width: 1024,
      height: 768,
    });
    expect(started.timestamp).toBeGreaterThanOrEqual(before - 1);
    await desk.run("xsetroot", ["-solid", "#ff0000"]);
    const path = join(dir, "stream.ts");
    const save = () => {
      writeFileSync(path, Buffer.concat(socket.bytes));
      return path;
    };
    await untilLastFrameNear(save, 300, 300, [255, 0, 0]);
    await socket.close();
    save();
    // Whole 188-byte packets, each starting with the sync byte.
    expect(socket.byteCount() % 188).toBe(0);
    expect(socket.bytes.every((b) => b[0] === 0x47)).toBe(true);
    const video = await probeVideo(path);
    expect(video).toMatchObject({ codec: "h264", width: 1024, height: 768 });
    expect(near(await pixelAt(path, video.frames.at(-1)!, 300, 300), [255, 0, 0])).toBe(true);
  });

  it("clamps fps, bitrate_kbps and gop as upstream does, and echoes session_id", async () => {
    const started = async (query: string) => {
      const socket = await ProtocolSocket.open(`/ws/h264?${query}`);
      const message = await socket.next(() => true);
      await socket.close();
      return message;
    };
    expect(await started("fps=0&bitrate_kbps=1000000000&gop=100000&session_id=mine")).toMatchObject({
      session_id: "mine",
      fps: 1,
      bitrate_kbps: 12000,
      gop: 240,
    });
    // Python's int("1e9") fails: the default; float("1e9") is 1e9: clamped.
    expect(await started("fps=1e9&bitrate_kbps=1e9&gop=-3")).toMatchObject({
      fps: 60,
      bitrate_kbps: 2000,
      gop: 1,
    });
    expect(await started("fps=abc&bitrate_kbps=100")).toMatchObject({ fps: 12, bitrate_kbps: 250, gop: 12 });
    // gop defaults to round(fps), Python's round: 2.5 → 2.
    expect(await started("fps=2.5")).toMatchObject({ fps: 2.5, gop: 2 });
    const long = await ProtocolSocket.open(`/ws/h264?session_id=${"x".repeat(300)}`);
    expect(await long.next(() => true)).toMatchObject({
      type: "error",
      error: expect.stringMatching(/^session_id: /),
    });
    expect(await long.closed).toBe(1008);
    await expect.poll(liveEncoders, { timeout: 10_000 }).toEqual([]);
  });
});

describe("WS /ws/control", () => {
  it("answers ping, bad JSON and unknown types, and closes on close", async () => {
    const control = await ProtocolSocket.open("/ws/control?session_id=any-name-at-all");
    expect(await control.next(() => true)).toEqual({
      type: "control_ready",
      session_id: "any-name-at-all",
      timestamp: expect.any(Number),
    });
    control.send({ type: "ping" });
    expect(await control.next((m) => m.type === "pong")).toMatchObject({ session_id: "any-name-at-all" });
    control.send("{oops");
    expect((await control.next((m) => m.type === "error")).error).toMatch(/^Invalid JSON message: /);
    control.send({ type: "dance" });
    expect(await control.next((m) => m.error === "Unsupported message type: dance")).toMatchObject({
      type: "error",
    });
    control.send({ type: "close" });
    await control.closed;
  });

  it("runs actions while the video streams: each is acknowledged, then its result", async () => {
    const video = await ProtocolSocket.open("/ws/h264?fps=10");
    const { session_id } = await video.next(() => true);
    const control = await ProtocolSocket.open(`/ws/control?session_id=${session_id}`);
    await control.next(() => true);

    const moved = await act(control, { action_type: "MOVE_TO", parameters: { x: 100, y: 120 } }, "a1");
    expect(moved.ack).toEqual({
      type: "action_ack",
      session_id,
      action_id: "a1",
      timestamp: expect.any(Number),
      status: "received",
    });
    expect(moved.result).toEqual({
      type: "action_result",
      session_id,
      action_id: "a1",
      timestamp: expect.any(Number),
      status: "success",
      started_at: expect.any(Number),
      completed_at: expect.any(Number),
      result: {},
    });
    expect(await desk.pointer()).toEqual({ x: 100, y: 120 });

    // Parameters beside action_type, as upstream also reads them.
    const clicked = await act(control, { action_type: "CLICK", x: 200, y: 210, num_clicks: 2 }, "a2");
    expect(clicked.result.status).toBe("success");
    const entries = await activity();
    expect(entries.slice(-2).map((e) => [e.transport, e.command, e.params])).toEqual([
      ["osworld", "move_cursor", { x: 100, y: 120 }],
      ["osworld", "double_click", { x: 200, y: 210 }],
    ]);

    // A command that paints the screen: the video shows it.
    const painted = await act(
      control,
      { action_type: "EXECUTE", parameters: { command: "xsetroot -solid '#00ff00' && echo painted" } },
      "a3",
    );
    expect(painted.result).toMatchObject({
      status: "success",
      result: { output: "painted\n", error: "", returncode: 0 },
    });
    const path = join(dir, "acted.ts");
    const save = () => {
      writeFileSync(path, Buffer.concat(video.bytes));
      return path;
    };
    await untilLastFrameNear(save, 500, 400, [0, 255, 0]);
    await video.close();
    save();
    const probed = await probeVideo(path);
    expect(near(await pixelAt(path, probed.frames.at(-1)!, 500, 400), [0, 255, 0])).toBe(true);

    const failing = await act(
      control,
      { action_type: "EXECUTE", parameters: { command: ["sh", "-c", "echo no >&2; exit 3"] } },
      "a4",
    );
    expect(failing.result).toMatchObject({
      status: "error",
      result: { output: "", error: "no\n", returncode: 3 },
    });
    const noop = await act(control, { action_type: "WAIT" }, "a5");
    expect(noop.result).toMatchObject({ status: "success", result: { noop: true } });
    const unknown = await act(control, { action_type: "FLY", parameters: {} }, "a6");
    expect(unknown.result).toEqual({
      type: "action_result",
      session_id,
      action_id: "a6",
      timestamp: expect.any(Number),
      status: "error",
      error: "Unknown action type: FLY",
    });
    const empty = await act(control, { action_type: "HOTKEY", parameters: { keys: [] } }, "a7");
    expect(empty.result).toMatchObject({ status: "error", error: "Keys must be a non-empty list of keys" });
    const half = await act(control, { action_type: "CLICK", parameters: { x: 5 } }, "a8");
    expect(half.result).toMatchObject({
      status: "error",
      error: expect.stringMatching(/^Unknown parameters: /),
    });
    const badKey = await act(control, { action_type: "PRESS", parameters: { key: "no-such-key" } }, "a9");
    expect(badKey.result).toMatchObject({ status: "error", error: expect.stringMatching(/no-such-key/) });
    // An action without an id is given one.
    const from = control.messages.length;
    control.send({ type: "action", action: { action_type: "DONE" } });
    const ack = await control.next((m) => m.type === "action_ack", from);
    expect(ack.action_id).toMatch(/^[0-9a-f]{32}$/);
    await control.close();
    await expect.poll(liveEncoders, { timeout: 10_000 }).toEqual([]);
  });
});

describe("GET /live/h264.mp4", () => {
  it("is the same video as fragmented MP4, sharing the encoder of /ws/h264 with the same parameters", async () => {
    const socket = await ProtocolSocket.open("/ws/h264?fps=12&bitrate_kbps=2000&gop=12");
    await socket.next(() => true);
    const mp4 = await SavedStream.open(`${desk.base}/live/h264.mp4?fps=12&bitrate_kbps=2000&gop=12`);
    expect(mp4.response.status).toBe(200);
    expect(mp4.response.headers.get("content-type")).toBe("video/mp4");
    expect(liveEncoders()).toHaveLength(1);
    await desk.run("xsetroot", ["-solid", "#0000ff"]);
    const path = join(dir, "live.mp4");
    await mp4.lastFrameNear(path, 300, 300, [0, 0, 255]);
    await mp4.stop(path);
    await socket.close();
    const video = await probeVideo(path);
    expect(video).toMatchObject({ codec: "h264", width: 1024, height: 768 });
    expect(near(await pixelAt(path, video.frames.at(-1)!, 300, 300), [0, 0, 255])).toBe(true);
    await expect.poll(liveEncoders, { timeout: 10_000 }).toEqual([]);
  });

  it("refuses foreign origins and hosts, on the sockets too", async () => {
    const foreign = { origin: "https://evil.example" };
    expect((await rawRequest(desk.base, "GET", "/live/h264.mp4", foreign)).status).toBe(403);
    expect((await rawRequest(desk.base, "GET", "/live/h264.mp4", { host: "evil.example" })).status).toBe(403);
    for (const path of ["/ws/h264", "/ws/control"]) {
      const socket = new WebSocket(`${wsBase()}${path}`, { headers: foreign });
      socket.on("error", () => undefined);
      const [, res] = await once(socket, "unexpected-response");
      expect(res.statusCode).toBe(403);
      socket.terminate();
    }
  });
});
