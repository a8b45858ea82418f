/**
 * The H.264 live stream on a real desktop (Xvfb + openbox), as people and programs see it: the
 * console page in Debian's Chromium decodes it with WebCodecs (the canvas shows what was painted,
 * nothing is sent while the screen is still, JPEG when asked, take control and share links as with
 * JPEG), `GET /live.mp4` is fragmented MP4 that ffprobe reads as H.264 and a plain `<video>` plays,
 * viewers share one encoder that ends with the last of them, and the origin policy guards both.
 * Screenshots of the page go to .tmp/console/.
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { collectProblems, launchBrowser } from "../support/browser.js";
import { type DesktopServer, PYTHON, startDesktopServer } from "../support/desktop.js";
import { liveEncoders, SavedStream, StreamSocket } from "../support/live-stream.js";
import { rawRequest } from "../support/raw-http.js";
import { near, pixelAt, probeVideo } from "../support/video.js";

const SHOTS = join(import.meta.dirname, "../../.tmp/console");
/** A full-screen window redrawing itself every 16 ms (the live view benchmark's). */
const ANIMATION = join(import.meta.dirname, "../../bench/apps/live-screen.py");

let desk: DesktopServer;
let browser: Browser;
let page: Page;
let dir: string;
const problems: string[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  dir = mkdtempSync(join(tmpdir(), "hangar-live-h264-"));
  [desk, browser] = await Promise.all([startDesktopServer({ width: 1280, height: 800 }), launchBrowser()]);
  await desk.run("xsetroot", ["-solid", "#203040"]);
  // The stream draws the pointer: it waits in a corner, away from the pixels looked at.
  await desk.run("xdotool", ["mousemove", "1270", "790"]);
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  collectProblems(page, problems);
  await page.goto(desk.server.url);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await desk?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Where the tests look at the screen. */
const SPOT = { x: 500, y: 300 };

const liveUrl = () => `${desk.server.url.replace("http", "ws")}/live`;

/** The live view's colour at a screen point, and what the page says of it. */
function canvasPixel(target: Page, point: { x: number; y: number }) {
  return target.evaluate(({ x, y }) => {
    const canvas = document.getElementById("screen") as HTMLCanvasElement;
    const scale = canvas.width / 1280;
    const [r, g, b] = canvas
      .getContext("2d")!
      .getImageData(Math.round(x * scale), Math.round(y * scale), 1, 1).data;
    return [r, g, b];
  }, point);
}

const live = (target: Page) =>
  target.evaluate(() => {
    const view = (window as unknown as { hangarLive: { frames: number; streaming: boolean } }).hangarLive;
    return {
      frames: view.frames,
      streaming: view.streaming,
      state: document.getElementById("live-state")!.textContent,
    };
  });

async function paint(colour: string) {
  await desk.run("xsetroot", ["-solid", colour]);
}

describe("the console's live view over H.264", () => {
  it("plays the desktop with WebCodecs, and sends nothing while the screen is still", async () => {
    await expect.poll(() => live(page), { timeout: 20_000 }).toMatchObject({ streaming: true });
    await paint("#ff0000");
    await expect
      .poll(() => canvasPixel(page, SPOT), { timeout: 15_000 })
      .toSatisfy((rgb: number[]) => near(rgb, [255, 0, 0]));
    expect((await live(page)).state).toMatch(/live, 1280x800, H\.264/);
    await page.screenshot({ path: join(SHOTS, "live-h264.png") });
    // Nothing moves now: over a second no frame arrives (an absence can only be watched for a while).
    const before = (await live(page)).frames;
    await page.waitForTimeout(1000);
    expect((await live(page)).frames).toBe(before);
    await paint("#00ff00");
    await expect
      .poll(() => canvasPixel(page, { x: 100, y: 700 }), { timeout: 15_000 })
      .toSatisfy((rgb: number[]) => near(rgb, [0, 255, 0]));
    expect(problems).toEqual([]);
  });

  it("sends JPEG frames when the person picks JPEG, and H.264 again after", async () => {
    await page.selectOption("#codec", "jpeg");
    await expect.poll(() => live(page)).toMatchObject({ streaming: false });
    await paint("#0000ff");
    await expect
      .poll(() => canvasPixel(page, SPOT), { timeout: 15_000 })
      .toSatisfy((rgb: number[]) => near(rgb, [0, 0, 255]));
    expect((await live(page)).state).toMatch(/JPEG/);
    await page.selectOption("#codec", "h264");
    await expect.poll(() => live(page)).toMatchObject({ streaming: true });
    await paint("#ffff00");
    await expect
      .poll(() => canvasPixel(page, SPOT), { timeout: 15_000 })
      .toSatisfy((rgb: number[]) => near(rgb, [255, 255, 0]));
    expect(problems).toEqual([]);
  });

  it("takes control as with JPEG: the person's click runs, shown in the timeline as live", async () => {
    await page.check("#control");
    await expect.poll(() => page.isVisible("#control-banner")).toBe(true);
    const box = (await page.locator("#screen").boundingBox())!;
    await page.mouse.click(box.x + box.width / 4, box.y + box.height / 4);
    const row = page.locator('#timeline li[data-command="left_click"]').last();
    await expect.poll(() => row.textContent()).toMatch(/live.*left_click \(320, 200\)/);
    await page.click("#handback");
    await expect.poll(() => page.isVisible("#control-banner")).toBe(false);
  });

  it("plays H.264 on a view-only share link, which cannot take control", async () => {
    const link = (await (
      await fetch(`${desk.server.url}/share`, { method: "POST", body: JSON.stringify({ ttl_s: 60 }) })
    ).json()) as { url: string };
    const viewer = await browser.newPage();
    await viewer.goto(new URL(link.url, desk.server.url).href);
    await expect.poll(() => live(viewer), { timeout: 20_000 }).toMatchObject({ streaming: true });
    await paint("#ff00ff");
    await expect
      .poll(() => canvasPixel(viewer, SPOT), { timeout: 15_000 })
      .toSatisfy((rgb: number[]) => near(rgb, [255, 0, 255]));
    const socket = await StreamSocket.open(`${desk.server.url.replace("http", "ws")}${link.url}live`);
    await socket.message("stream");
    socket.ws.send(JSON.stringify({ type: "control", on: true }));
    expect(await socket.until(() => socket.messages.find((m) => m.code === "view_only"))).toMatchObject({
      type: "error",
    });
    await socket.close();
    await viewer.close();
  });
});

describe("GET /live.mp4", () => {
  it("is fragmented MP4 that ffprobe reads as H.264, showing what was painted, at once", async () => {
    const mp4 = await SavedStream.open(`${desk.server.url}/live.mp4`);
    expect(mp4.response.status).toBe(200);
    expect(mp4.response.headers.get("content-type")).toBe("video/mp4");
    const path = join(dir, "live.mp4");
    await paint("#ff0000");
    await mp4.lastFrameNear(path, SPOT.x, SPOT.y, [255, 0, 0]);
    await paint("#00ffff");
    await mp4.lastFrameNear(path, SPOT.x, SPOT.y, [0, 255, 255]);
    await mp4.stop(path);
    const video = await probeVideo(path);
    expect(video).toMatchObject({ codec: "h264", width: 1280, height: 800 });
    // The first frame is the screen when the client came; each change is a frame of its own.
    expect(video.frames.length).toBeGreaterThanOrEqual(2);
    expect(near(await pixelAt(path, video.frames.at(-1)!, SPOT.x, SPOT.y), [0, 255, 255])).toBe(true);
  });

  it("plays in a plain <video> element while the screen changes", async () => {
    // Chromium's <video> reads a live stream in blocks and probes ~20 frames before it plays: a
    // screen that changes (a window redrawing itself) gives it those in a second or two.
    const animation = desk.spawn(PYTHON, [ANIMATION, "animate"]);
    const player = await browser.newPage();
    await player.goto(desk.server.url);
    await player.setContent(`<video id="v" src="${desk.server.url}/live.mp4" muted playsinline></video>`, {
      waitUntil: "commit",
    });
    await player.evaluate(() =>
      (document.getElementById("v") as HTMLVideoElement).play().catch(() => undefined),
    );
    const state = () =>
      player.evaluate(({ x, y }) => {
        const video = document.getElementById("v") as HTMLVideoElement;
        if (video.readyState < 2) return { time: 0, width: 0, rgb: [0, 0, 0] };
        const canvas = document.createElement("canvas");
        canvas.width = video.videoWidth;
        canvas.height = video.videoHeight;
        const ctx = canvas.getContext("2d")!;
        ctx.drawImage(video, 0, 0);
        return {
          time: video.currentTime,
          width: video.videoWidth,
          rgb: [...ctx.getImageData(x, y, 1, 1).data.slice(0, 3)],
        };
      }, SPOT);
    // It plays (its time goes on) and shows the animation's gradient, not an empty picture.
    await expect
      .poll(state, { timeout: 20_000 })
      .toSatisfy(
        ({ time, width, rgb }) => width === 1280 && time > 0.5 && Math.max(...rgb) - Math.min(...rgb) > 20,
      );
    animation.kill();
    await player.close();
  });

  it("is read by ffmpeg as it comes", async () => {
    await paint("#00ff00");
    // ffmpeg probes ~20 frames before it decodes (a still screen's are repeated five times a second),
    // then decodes the frames since the last keyframe, then the screen as it is: green.
    const ffmpeg = spawn("ffmpeg", [
      ...["-v", "error", "-i", `${desk.server.url}/live.mp4`, "-vf", `crop=2:2:${SPOT.x}:${SPOT.y}`],
      ...["-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:1"],
    ]);
    try {
      const green = await new Promise<boolean>((resolve) => {
        let bytes = Buffer.alloc(0);
        ffmpeg.stdout.on("data", (chunk: Buffer) => {
          bytes = Buffer.concat([bytes, chunk]);
          for (; bytes.length >= 12; bytes = bytes.subarray(12)) {
            if (near([...bytes.subarray(0, 3)], [0, 255, 0])) resolve(true);
          }
        });
        ffmpeg.once("close", () => resolve(false));
      });
      expect(green).toBe(true);
    } finally {
      ffmpeg.kill("SIGKILL");
    }
  }, 60_000);

  it("answers a bad parameter in words, and refuses foreign origins and hosts as every route", async () => {
    const bad = await fetch(`${desk.server.url}/live.mp4?fps=0`);
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ detail: expect.stringMatching(/^fps: /) });
    const foreign = { origin: "https://evil.example" };
    expect((await rawRequest(desk.server.url, "GET", "/live.mp4", foreign)).status).toBe(403);
    expect((await rawRequest(desk.server.url, "GET", "/live.mp4", { host: "evil.example" })).status).toBe(
      403,
    );
    const socket = new WebSocket(liveUrl(), { headers: foreign });
    socket.on("error", () => undefined);
    const refused = await new Promise<string>((resolve) =>
      socket.once("unexpected-response", (_req, res) => resolve(String(res.statusCode))),
    );
    expect(refused).toBe("403");
    socket.terminate();
  });
});

describe("the encoders", () => {
  it("are shared by viewers of the same stream and end with the last viewer", async () => {
    // The page's stream (25 fps): a socket and a /live.mp4 client at 25 fps share it.
    await page.close();
    await expect.poll(liveEncoders, { timeout: 10_000 }).toEqual([]);
    const sockets = await Promise.all([1, 2, 3].map(() => StreamSocket.open(liveUrl(), { fps: 25 })));
    await Promise.all(sockets.map((s) => s.message("stream")));
    const abort = new AbortController();
    expect(liveEncoders()).toHaveLength(1);
    // Players' streams repeat a still picture (the page's does not): they share one of their own.
    const mp4 = await fetch(`${desk.server.url}/live.mp4?fps=25&audio=0`, { signal: abort.signal });
    expect(mp4.status).toBe(200);
    const mp4Again = await fetch(`${desk.server.url}/live.mp4?fps=25&audio=0`, { signal: abort.signal });
    expect(mp4Again.status).toBe(200);
    expect(liveEncoders()).toHaveLength(2);
    // Another rate is another encoder.
    const other = await StreamSocket.open(liveUrl(), { fps: 10 });
    await other.message("stream");
    expect(liveEncoders()).toHaveLength(3);
    await other.close();
    await expect.poll(() => liveEncoders().length, { timeout: 10_000 }).toBe(2);
    for (const socket of sockets) await socket.close();
    await expect.poll(() => liveEncoders().length, { timeout: 10_000 }).toBe(1);
    abort.abort();
    await expect.poll(liveEncoders, { timeout: 10_000 }).toEqual([]);
  });
});
