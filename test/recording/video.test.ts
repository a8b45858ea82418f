/**
 * Video recordings as an agent makes them (`start_recording` … `stop_recording` over /cmd) on a real
 * Xvfb, read back with ffprobe and ffmpeg: the video lasts as long as the recording did, has frames
 * where the screen changed and few where it was still, and shows the colour the screen had.
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
import { descendants, isRunning } from "../support/processes.js";
import { startTestServer } from "../support/server.js";
import { near, pixelAt, probeVideo } from "../support/video.js";

let display: VirtualDisplay;
let manager: DesktopManager;
let server: Awaited<ReturnType<typeof startTestServer>>;
let dir: string;

beforeAll(async () => {
  display = await startVirtualDisplay({ width: 640, height: 480, windowManager: false });
  manager = new DesktopManager({ display: display.display });
  dir = mkdtempSync(join(tmpdir(), "hangar-video-"));
  server = await startTestServer({ desktop: manager.provider, recordings: { dir: join(dir, "recordings") } });
});
afterAll(async () => {
  await server?.close();
  await manager?.close();
  await display?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function cmd(command: string, params: Record<string, unknown> = {}) {
  return (await server.cmd(command, params)).event;
}

/** Paints the whole screen (the root window: no window manager, no windows) through run_command. */
async function paint(colour: string) {
  const reply = await cmd("run_command", { command: `xsetroot -solid '${colour}'`, env: display.env });
  expect(reply.return_code).toBe(0);
}

const waitMs = (ms: number) => cmd("wait", { ms });

describe("start_recording and stop_recording", () => {
  it("records what commands did, with real time: changes are frames, a still spell is long and cheap", async () => {
    await paint("#000000");
    const path = join(dir, "agent.mp4");
    const started = await cmd("start_recording", { path, fps: 10 });
    const t0 = performance.now();
    expect(started).toMatchObject({ success: true, path, format: "mp4", width: 640, height: 480 });

    await waitMs(800);
    const redFrom = (performance.now() - t0) / 1000;
    await paint("#ff0000");
    const redAt = (performance.now() - t0) / 1000;
    await waitMs(800);
    await paint("#00ff00");
    const greenAt = (performance.now() - t0) / 1000;
    // A still spell: the screen does not change for 2.5 s.
    await waitMs(2500);
    await paint("#0000ff");
    const blueAt = (performance.now() - t0) / 1000;
    await waitMs(600);
    const stopped = await cmd("stop_recording");
    const wall = (performance.now() - t0) / 1000;

    expect(stopped).toMatchObject({ success: true, path, format: "mp4" });
    expect(stopped.error).toBeUndefined();
    expect(stopped.size_bytes).toBe(statSync(path).size);
    const video = await probeVideo(path);
    expect(video).toMatchObject({ codec: "h264", width: 640, height: 480 });
    expect(stopped.frames).toBe(video.frames.length);
    // A still minute is a minute: the video is as long as the recording was (within 5 %).
    expect(Math.abs(video.duration - wall) / wall).toBeLessThan(0.05);
    expect(Math.abs(stopped.duration_s - video.duration)).toBeLessThan(0.2);
    // A frame soon after each change (the reply of run_command comes after the X server drew it).
    for (const at of [redAt, greenAt, blueAt]) {
      expect(video.frames.some((t) => t >= at - 0.3 && t <= at + 0.4)).toBe(true);
    }
    // Nothing changed between green and blue: at most the pointer's heartbeat frames, not 25 frames.
    const still = video.frames.filter((t) => t > greenAt + 0.4 && t < blueAt - 0.3);
    expect(still.length).toBeLessThanOrEqual(2);
    expect(video.frames.length).toBeLessThan(25);

    // (Away from the pointer, which is drawn at the screen's centre.)
    expect(near(await pixelAt(path, redAt + 0.4, 500, 400), [255, 0, 0])).toBe(true);
    // Frames keep their millisecond: the red one is not placed before the paint began (in ticks of
    // 1/fps it could be, by up to half a tick).
    expect(near(await pixelAt(path, redFrom - 0.002, 500, 400), [0, 0, 0])).toBe(true);
    expect(near(await pixelAt(path, greenAt + 1.5, 500, 400), [0, 255, 0])).toBe(true);
    expect(near(await pixelAt(path, wall - 0.2, 500, 400), [0, 0, 255])).toBe(true);
  }, 60_000);

  it("draws the pointer where it is, and moves it when the agent moves it", async () => {
    await paint("#808080");
    const path = join(dir, "pointer.webm");
    expect(await cmd("move_cursor", { x: 100, y: 100 })).toMatchObject({ success: true });
    const started = await cmd("start_recording", { path });
    expect(started).toMatchObject({ success: true, format: "webm" });
    const t0 = performance.now();
    await waitMs(500);
    expect(await cmd("move_cursor", { x: 400, y: 300 })).toMatchObject({ success: true });
    const movedAt = (performance.now() - t0) / 1000;
    await waitMs(700);
    const stopped = await cmd("stop_recording");
    expect(stopped).toMatchObject({ success: true, format: "webm" });
    const video = await probeVideo(path);
    expect(video.codec).toBe("vp8");
    // The arrow is white inside (on a grey screen), a few pixels right of and below its tip.
    const arrowAt = (x: number, y: number, seconds: number) => pixelAt(path, seconds, x + 2, y + 8);
    const white = [255, 255, 255];
    const grey = [128, 128, 128];
    expect(near(await arrowAt(100, 100, 0.2), white)).toBe(true);
    expect(near(await arrowAt(400, 300, 0.2), grey)).toBe(true);
    expect(near(await arrowAt(400, 300, movedAt + 0.5), white)).toBe(true);
    expect(near(await arrowAt(100, 100, movedAt + 0.5), grey)).toBe(true);
  }, 60_000);

  it("scales the video to max_width and draws no pointer when asked", async () => {
    await paint("#336699");
    const path = join(dir, "small.mp4");
    await cmd("start_recording", { path, max_width: 321, cursor: false });
    await waitMs(300);
    const stopped = await cmd("stop_recording");
    expect(stopped).toMatchObject({ success: true, width: 320, height: 240 });
    const video = await probeVideo(path);
    expect(video).toMatchObject({ width: 320, height: 240 });
    expect(near(await pixelAt(path, 0.1, 50, 50), [0x33, 0x66, 0x99])).toBe(true);
  });

  it("records one video per display at a time, and says so", async () => {
    const first = await cmd("start_recording", {});
    expect(first).toMatchObject({ success: true, format: "mp4" });
    expect(first.path.startsWith(join(dir, "recordings"))).toBe(true);
    const second = await cmd("start_recording", { path: join(dir, "second.mp4") });
    expect(second).toMatchObject({ success: false, code: "failed" });
    expect(second.error).toContain("already running");
    expect(second.error).toContain(first.path);
    const status = await cmd("recording_status");
    expect(status.recording).toMatchObject({ id: first.id, path: first.path });
    const stopped = await cmd("stop_recording");
    expect(stopped).toMatchObject({ success: true, id: first.id });
    expect((await cmd("recording_status")).recording).toBeNull();
    const again = await cmd("stop_recording");
    expect(again).toMatchObject({ success: false, code: "not_found" });
  });

  it("refuses an existing file unless told to overwrite it, and bad parameters with their name", async () => {
    const path = join(dir, "agent.mp4");
    const refused = await cmd("start_recording", { path });
    expect(refused).toMatchObject({ success: false, code: "failed" });
    expect(refused.error).toContain("overwrite");
    expect(await cmd("start_recording", { fps: 0 })).toMatchObject({
      success: false,
      code: "invalid_params",
    });
    const format = await cmd("start_recording", { format: "avi" });
    expect(format).toMatchObject({ success: false, code: "invalid_params" });
    expect(format.error).toContain("format");
    const replaced = await cmd("start_recording", { path, overwrite: true });
    expect(replaced).toMatchObject({ success: true });
    expect((await cmd("stop_recording")).success).toBe(true);
  });

  it("finishes the file and ends the encoder when the server closes mid-recording", async () => {
    const own = await startTestServer({
      desktop: manager.provider,
      recordings: { dir: join(dir, "closing") },
    });
    const path = join(dir, "closing.mp4");
    expect((await own.cmd("start_recording", { path })).event.success).toBe(true);
    const encoder = descendants(process.pid).find((p) => p.args.includes(path));
    expect(encoder?.args).toMatch(/^\S*ffmpeg /);
    await own.close();
    expect(isRunning(encoder!.pid)).toBe(false);
    const video = await probeVideo(path);
    expect(video.frames.length).toBeGreaterThan(0);
  });
});

describe("the recordings list", () => {
  it("lists every recording with its state, newest first", async () => {
    const reply = await fetch(`${server.url}/recordings`);
    expect(reply.status).toBe(200);
    const { recordings } = (await reply.json()) as { recordings: Record<string, unknown>[] };
    expect(recordings.length).toBeGreaterThanOrEqual(4);
    expect(recordings[0]).toMatchObject({ state: "finished", format: "mp4" });
    expect(recordings.map((r) => r.path)).toContain(join(dir, "pointer.webm"));
  });
});
