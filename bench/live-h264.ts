/**
 * The H.264 live stream (issue 47) at 1920x1080, against its targets:
 * - the whole screen changing all the time (bench/apps/live-screen.py): frames the console page
 *   decodes and draws a second, and the CPU of the server and its encoder (1 s windows);
 * - a still screen with one viewer: the same CPU;
 * - glass to glass: an agent's click that turns a full-screen window from black to white, to the
 *   changed pixels on the page's canvas (WebCodecs), beside the same for JPEG frames;
 * - bandwidth of an agent session in Chromium (bench/apps/agent-session.ts): the bytes of the
 *   H.264 stream against the JPEG stream's, both watched at once;
 * - sound: a tone starting on the desktop to the page's decoded sound holding it.
 * The server runs in this process (its CPU is this process's); the encoder's is read from /proc.
 * Run after `npm run build` (the page's bundle): node --import tsx bench/live-h264.ts
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Page } from "playwright-core";
import WebSocket from "ws";
import { launchBrowser } from "../test/support/browser.js";
import { PYTHON, startDesktopServer } from "../test/support/desktop.js";
import { liveEncoders } from "../test/support/live-stream.js";
import { agentSession, openArticle } from "./apps/agent-session.js";
import { closeClient, post } from "./client.js";
import { median, p95, printTable, type Row, summarize } from "./lib.js";

const APP = join(import.meta.dirname, "apps/live-screen.py");
const WIDTH = 1920;
const HEIGHT = 1080;
const WINDOWS = 10;
const CLICKS = 20;
const SESSION_S = 60;
const TICKS_PER_S = 100;

function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S;
  } catch {
    return 0;
  }
}

/** The video's size the live encoder makes (it scales to what the page asks), from its command line. */
function encodedSize(): string {
  const [pid] = liveEncoders();
  if (pid === undefined) return "no encoder";
  const args = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  const scaled = /scale=(\d+):(\d+)/.exec(args);
  return scaled ? `${scaled[1]}x${scaled[2]}` : `${WIDTH}x${HEIGHT}`;
}

/**
 * Cores used by this process and the live encoders in each of `count` 1 s windows (all, and the
 * encoders' alone), and what `each` counted.
 */
async function windows(count: number, each: () => Promise<number>) {
  const cores: number[] = [];
  const encoderCores: number[] = [];
  const counted: number[] = [];
  for (let i = 0; i < count; i++) {
    const encoders = liveEncoders();
    const server = process.cpuUsage();
    const before = encoders.map(cpuSeconds);
    const first = await each();
    const t = performance.now();
    await sleep(1000);
    const elapsed = (performance.now() - t) / 1000;
    const used = process.cpuUsage(server);
    const encoder = encoders.reduce((sum, pid, j) => sum + cpuSeconds(pid) - before[j], 0);
    cores.push(((used.user + used.system) / 1e6 + encoder) / elapsed);
    encoderCores.push(encoder / elapsed);
    counted.push(((await each()) - first) / elapsed);
  }
  return { cores, encoderCores, counted };
}

const live = (page: Page) =>
  page.evaluate(() => {
    const view = (window as unknown as { hangarLive: { frames: number; streaming: boolean } }).hangarLive;
    return { frames: view.frames, streaming: view.streaming };
  });

/**
 * The canvas's brightness (0–255) a little above and left of the middle of the screen: the stream
 * draws the pointer, whose tip is where the agent clicked.
 */
const middle = (page: Page) =>
  page.evaluate(() => {
    const canvas = document.getElementById("screen") as HTMLCanvasElement;
    const off = Math.round(canvas.width / 48);
    return canvas.getContext("2d")!.getImageData((canvas.width >> 1) - off, (canvas.height >> 1) - off, 1, 1)
      .data[0];
  });

/** Times from an agent's click to the page's canvas showing the window's new colour. */
async function clickToPixels(page: Page, url: string): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < CLICKS; i++) {
    const before = await middle(page);
    const started = performance.now();
    await post(url, "left_click", { x: WIDTH >> 1, y: HEIGHT >> 1 });
    await page.waitForFunction(
      (was) => {
        const canvas = document.getElementById("screen") as HTMLCanvasElement;
        const off = Math.round(canvas.width / 48);
        const now = canvas
          .getContext("2d")!
          .getImageData((canvas.width >> 1) - off, (canvas.height >> 1) - off, 1, 1).data[0];
        return Math.abs(now - was) > 128;
      },
      before,
      { polling: "raf" },
    );
    samples.push(performance.now() - started);
    await sleep(300);
  }
  return samples;
}

/** A program-side viewer of `WS /live` counting the bytes it is sent. */
async function countingViewer(url: string, settings: Record<string, unknown>) {
  const socket = new WebSocket(`${url.replace("http", "ws")}/live`);
  let bytes = 0;
  socket.on("message", (data: Buffer, binary) => {
    if (binary) bytes += data.length;
  });
  await new Promise((resolve) => socket.once("open", resolve));
  socket.send(JSON.stringify({ type: "settings", ...settings }));
  return {
    bytes: () => bytes,
    close: () => socket.close(),
  };
}

const rows: Row[] = [];
const dir = mkdtempSync(join(tmpdir(), "hangar-bench-live-"));
const browser = await launchBrowser();
const desk = await startDesktopServer({ width: WIDTH, height: HEIGHT, audio: true });
const url = desk.server.url;
try {
  const page = await browser.newPage({ viewport: { width: 1920, height: 1200 } });
  await page.goto(url);
  await page.waitForFunction(() => (window as any).hangarLive.streaming, undefined, { timeout: 30_000 });

  // The whole screen changing.
  const animation = desk.spawn(PYTHON, [APP, "animate"]);
  await page.waitForFunction(() => (window as any).hangarLive.frames > 30, undefined, { timeout: 30_000 });
  await sleep(2000);
  const busy = await windows(WINDOWS, async () => (await live(page)).frames);
  const video = encodedSize();
  rows.push({
    name: "1920x1080, whole screen changing: frames the page decodes and draws (1 s windows)",
    median: `${median(busy.counted).toFixed(1)} fps`,
    p95: `${Math.min(...busy.counted).toFixed(1)} fps (fewest)`,
    target: "≥ 25 fps",
    note: `the page 1920 wide asks for a ${video} video`,
  });
  rows.push({
    name: "the same: server + encoder CPU",
    median: `${median(busy.cores).toFixed(2)} cores`,
    p95: `${p95(busy.cores).toFixed(2)} cores`,
    target: "≤ 0.5 core",
    note: `the encoder ${median(busy.encoderCores).toFixed(2)} of it`,
  });
  animation.kill();

  // A still screen, then the click-to-pixels latency (the window swaps black and white at each click).
  const still = desk.spawn(PYTHON, [APP, "click"]);
  await desk.waitForWindow("live-screen");
  await sleep(2000);
  const idle = await windows(WINDOWS, async () => (await live(page)).frames);
  rows.push({
    name: "1920x1080, still screen, one H.264 viewer: server + encoder CPU",
    median: `${(median(idle.cores) * 100).toFixed(2)} %`,
    p95: `${(p95(idle.cores) * 100).toFixed(2)} %`,
    target: "≈ 0",
    note: `${median(idle.counted).toFixed(1)} frames/s sent`,
  });
  rows.push({
    name: "click → changed pixels on the page's canvas, H.264 (WebCodecs)",
    ...summarize(await clickToPixels(page, url)),
    target: "≤ 150 ms",
  });
  await page.selectOption("#codec", "jpeg");
  await page.waitForFunction(() => !(window as any).hangarLive.streaming);
  await sleep(1000);
  rows.push({
    name: "the same, JPEG frames (for comparison)",
    ...summarize(await clickToPixels(page, url)),
  });
  still.kill();
  await page.close();
  await sleep(1000);

  // Bandwidth of an agent session: both streams watched at once, at the console's settings.
  const article = await openArticle(desk, dir, WIDTH, HEIGHT);
  const h264 = await countingViewer(url, { codec: "h264", fps: 30 });
  const jpeg = await countingViewer(url, { codec: "jpeg", fps: 25, quality: 70, width: WIDTH });
  await sleep(2000);
  const [h0, j0] = [h264.bytes(), jpeg.bytes()];
  await agentSession(url, SESSION_S);
  const [h, j] = [h264.bytes() - h0, jpeg.bytes() - j0];
  rows.push({
    name: `agent session in Chromium (${SESSION_S} s: click, type, scroll, pauses): H.264 bytes / JPEG bytes`,
    median: `${((h / j) * 100).toFixed(1)} %`,
    p95: "",
    target: "≤ 25 %",
    note: `H.264 ${(h / 1e6 / (SESSION_S / 60)).toFixed(2)} MB/min, JPEG ${(j / 1e6 / (SESSION_S / 60)).toFixed(2)} MB/min`,
  });
  h264.close();
  jpeg.close();
  article.kill();

  // Sound: a tone that starts on the desktop, to the page's decoded samples holding it.
  const listener = await browser.newPage();
  await listener.goto(url);
  await listener.waitForFunction(() => (window as any).hangarLive.streaming, undefined, { timeout: 30_000 });
  await listener.check("#sound");
  await sleep(2000);
  const heard: number[] = [];
  for (let i = 0; i < 10; i++) {
    // pacat plays raw samples as they are written: silence, then the tone from a known moment.
    const pacat = spawn(
      "pacat",
      ["--raw", "--format=s16le", "--rate=48000", "--channels=1", "--latency-msec=20"],
      {
        env: desk.env,
        stdio: ["pipe", "ignore", "ignore"],
      },
    );
    pacat.stdin.write(Buffer.alloc(48000 * 2 * 0.2));
    await sleep(500);
    const tone = Buffer.alloc(48000 * 2);
    for (let s = 0; s < 48000; s++)
      tone.writeInt16LE(Math.round(12000 * Math.sin((2 * Math.PI * 440 * s) / 48000)), s * 2);
    const started = performance.now();
    pacat.stdin.write(tone);
    await listener.waitForFunction(
      () => {
        const samples = (window as any).hangarLive.player.soundSamples() as Float32Array;
        let peak = 0;
        for (let k = samples.length - 960; k < samples.length; k++)
          peak = Math.max(peak, Math.abs(samples[k]));
        return peak > 0.2;
      },
      undefined,
      { polling: "raf", timeout: 10_000 },
    );
    heard.push(performance.now() - started);
    pacat.stdin.end();
    await sleep(1500);
  }
  rows.push({
    name: "a tone starting on the desktop → decoded in the page (it plays 80 ms later)",
    ...summarize(heard),
    target: "≤ 300 ms",
  });
  await listener.close();
} finally {
  closeClient();
  await browser.close();
  await desk.stop();
  rmSync(dir, { recursive: true, force: true });
}
printTable("H.264 live stream", rows);
