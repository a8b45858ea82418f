/**
 * Video recording benchmark (issue 35), at 1920x1080 with the default settings (10 fps cap, pointer
 * drawn, H.264):
 * - a still screen: CPU of the server and the encoder together, in 1 s windows;
 * - the whole screen changing all the time (bench/apps/live-screen.py): frames a second kept, and the
 *   CPU of the server and the encoder;
 * - a typical agent session in Chromium (click a field, type a sentence, scroll the page, a pause
 *   between actions): the video's size per minute.
 * The server runs in this process (its CPU is this process's); the encoder's CPU is read from /proc.
 * Run: node --import tsx bench/recording.ts
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { PYTHON, startDesktopServer } from "../test/support/desktop.js";
import { descendants } from "../test/support/processes.js";
import { agentSession, openArticle } from "./apps/agent-session.js";
import { closeClient, post } from "./client.js";
import { median, p95, printTable, type Row } from "./lib.js";

const APP = join(import.meta.dirname, "apps/live-screen.py");
const WIDTH = 1920;
const HEIGHT = 1080;
const STILL_WINDOWS = 20;
const BUSY_WINDOWS = 10;
const SESSION_S = 60;
const TICKS_PER_S = 100;

const dir = mkdtempSync(join(tmpdir(), "hangar-bench-recording-"));
const desk = await startDesktopServer(
  { width: WIDTH, height: HEIGHT },
  { server: { recordings: { dir: join(dir, "recordings") } } },
);
const url = desk.server.url;

/** CPU seconds a process has used (user + system), from /proc. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S;
}

function encoderPid(): number {
  const found = descendants(process.pid).find((p) => /(^|\/)ffmpeg /.test(p.args));
  if (!found) throw new Error("no encoder running");
  return found.pid;
}

/** Cores used by this process and the encoder in each of `count` windows of 1 s, and frames written. */
async function windows(count: number) {
  const pid = encoderPid();
  const cores: number[] = [];
  const framesAtStart = (await post(url, "recording_status")).recording.frames;
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const server = process.cpuUsage();
    const encoder = cpuSeconds(pid);
    const t = performance.now();
    await sleep(1000);
    const elapsed = (performance.now() - t) / 1000;
    const used = process.cpuUsage(server);
    cores.push(((used.user + used.system) / 1e6 + cpuSeconds(pid) - encoder) / elapsed);
  }
  const frames = (await post(url, "recording_status")).recording.frames - framesAtStart;
  return { cores, fps: frames / ((performance.now() - started) / 1000) };
}

/** How many times a second the screen changes: captures that are not the previous one (X DAMAGE). */
async function changesPerSecond(seconds: number) {
  const backend = await desk.manager.get();
  let last = await backend.capture();
  let changes = 0;
  const started = performance.now();
  while (performance.now() - started < seconds * 1000) {
    await sleep(20);
    const now = await backend.capture();
    if (now !== last) changes++;
    last = now;
  }
  return changes / seconds;
}

const rows: Row[] = [];
const percent = (x: number) => `${(x * 100).toFixed(2)} %`;
try {
  // A still screen: a plain black window over the whole desktop.
  const still = desk.spawn(PYTHON, [APP, "click"]);
  await desk.waitForWindow("live-screen");
  await sleep(1000);
  await post(url, "start_recording", { path: join(dir, "still.mp4") });
  await sleep(1000);
  const quiet = await windows(STILL_WINDOWS);
  await post(url, "stop_recording");
  rows.push({
    name: "1920x1080 still screen: server + encoder CPU (1 s windows)",
    median: percent(median(quiet.cores)),
    p95: percent(p95(quiet.cores)),
    target: "≤ 2 % of one core",
    note: `mean ${percent(quiet.cores.reduce((a, b) => a + b, 0) / quiet.cores.length)}; ${quiet.fps.toFixed(2)} frames/s written (a repeat every 5 s)`,
  });
  still.kill();

  // The whole screen changing (the app redraws it every 16 ms, as fast as a loaded machine lets it).
  const busy = desk.spawn(PYTHON, [APP, "animate"]);
  await desk.waitForWindow("live-screen");
  await sleep(1000);
  const drawn = await changesPerSecond(5);
  await post(url, "start_recording", { path: join(dir, "busy.mp4") });
  await sleep(1000);
  const moving = await windows(BUSY_WINDOWS);
  const busyStop = await post(url, "stop_recording");
  rows.push({
    name: "1920x1080 whole screen changing: frames kept",
    median: `${moving.fps.toFixed(1)} fps`,
    p95: "",
    target: "≥ 10 fps",
    note: `fps cap 10; the app drew ${drawn.toFixed(1)} new screens a second just before; ${(busyStop.size_bytes / busyStop.duration_s / 1024).toFixed(0)} KiB/s of video`,
  });
  rows.push({
    name: "1920x1080 whole screen changing: server + encoder CPU (1 s windows)",
    median: `${median(moving.cores).toFixed(2)} cores`,
    p95: `${p95(moving.cores).toFixed(2)} cores`,
    target: "≤ 0.7 core",
  });
  busy.kill();

  // A typical agent session in a browser: click, type, scroll, with pauses between actions.
  const browser = await openArticle(desk, dir, WIDTH, HEIGHT);
  const sessionPath = join(dir, "session.mp4");
  await post(url, "start_recording", { path: sessionPath });
  await agentSession(url, SESSION_S);
  const session = await post(url, "stop_recording");
  const minutes = session.duration_s / 60;
  rows.push({
    name: "typical agent session (Chromium: click, type, scroll, pauses), 1920x1080",
    median: `${(statSync(sessionPath).size / 1e6 / minutes).toFixed(2)} MB/min`,
    p95: "",
    target: "≤ 3 MB per minute",
    note: `${session.frames} frames in ${session.duration_s.toFixed(0)} s`,
  });
  browser.kill();
} finally {
  closeClient();
  await desk.stop();
  rmSync(dir, { recursive: true, force: true });
}
printTable("Video recording", rows);
