/**
 * Live view benchmark (issue 18): frames per second a browser receives and draws while the whole
 * screen changes all the time, the server's CPU per frame, its CPU with a viewer on a still screen,
 * and the time from an agent's click to the changed pixels in the browser's canvas.
 * The server runs in this process (its CPU is this process's); the browser is Debian's Chromium.
 * Run after `npm run build` (the page's bundle): node --import tsx bench/live.ts
 */
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Page } from "playwright-core";
import { launchBrowser } from "../test/support/browser.js";
import { PYTHON, startDesktopServer } from "../test/support/desktop.js";
import { closeClient, post } from "./client.js";
import { printTable, type Row, summarize } from "./lib.js";

const APP = join(import.meta.dirname, "apps/live-screen.py");
const WINDOW_S = 5;
const CLICKS = 20;

const frames = (page: Page) =>
  page.evaluate(() => (window as unknown as { hangarLive: { frames: number } }).hangarLive.frames);

/** The canvas's brightness (0–255) at the middle of the screen. */
const middle = (page: Page) =>
  page.evaluate(() => {
    const canvas = document.getElementById("screen") as HTMLCanvasElement;
    return canvas.getContext("2d")!.getImageData(canvas.width >> 1, canvas.height >> 1, 1, 1).data[0];
  });

/** CPU of this process in cores over `seconds`, and what `during` returned. */
async function cpuOver<T>(_seconds: number, during: () => Promise<T>) {
  const before = process.cpuUsage();
  const started = performance.now();
  const value = await during();
  const used = process.cpuUsage(before);
  const elapsed = (performance.now() - started) / 1000;
  return { cores: (used.user + used.system) / 1e6 / elapsed, elapsed, value };
}

const rows: Row[] = [];
const browser = await launchBrowser();
try {
  for (const [width, height, target] of [
    [1920, 1080, "≥ 15 fps at ≤ 1 core"],
    [1280, 800, "≥ 25 fps"],
  ] as const) {
    const desk = await startDesktopServer({ width, height });
    const page = await browser.newPage({ viewport: { width: 1920, height: 1200 } });
    try {
      const animation = desk.spawn(PYTHON, [APP, "animate"]);
      await page.goto(desk.server.url);
      await page.waitForFunction(() => (window as any).hangarLive.frames > 10, undefined, {
        timeout: 30_000,
      });
      const viewerWidth = await page.evaluate(
        () => (document.getElementById("screen") as HTMLCanvasElement).width,
      );
      const busy = await cpuOver(WINDOW_S, async () => {
        const first = await frames(page);
        await sleep(WINDOW_S * 1000);
        return (await frames(page)) - first;
      });
      const fps = busy.value / busy.elapsed;
      rows.push({
        name: `${width}x${height}, whole screen changing: frames drawn (viewer ${viewerWidth} px wide)`,
        median: `${fps.toFixed(1)} fps`,
        p95: "",
        target,
      });
      rows.push({
        name: `${width}x${height}: server CPU`,
        median: `${busy.cores.toFixed(2)} cores, ${((busy.cores * 1000) / fps).toFixed(1)} ms/frame`,
        p95: "",
        target: "≤ 1 core",
      });

      animation.kill();
      const still = desk.spawn(PYTHON, [APP, "click"]);
      await desk.waitForWindow("live-screen");
      await sleep(1500);
      const idle = await cpuOver(WINDOW_S, () => sleep(WINDOW_S * 1000));
      rows.push({
        name: `${width}x${height}: still screen, one viewer: server CPU`,
        median: `${(idle.cores * 100).toFixed(2)} %`,
        p95: "",
        target: "≤ 1 %",
      });

      const samples: number[] = [];
      for (let i = 0; i < CLICKS; i++) {
        const before = await middle(page);
        const started = performance.now();
        await post(desk.server.url, "left_click", { x: width >> 1, y: height >> 1 });
        await page.waitForFunction(
          (was) => {
            const canvas = document.getElementById("screen") as HTMLCanvasElement;
            const now = canvas.getContext("2d")!.getImageData(canvas.width >> 1, canvas.height >> 1, 1, 1)
              .data[0];
            return Math.abs(now - was) > 128;
          },
          before,
          { polling: "raf" },
        );
        samples.push(performance.now() - started);
      }
      rows.push({
        name: `${width}x${height}: click → changed pixels in the browser`,
        ...summarize(samples),
        target: "median ≤ 150 ms",
      });
      still.kill();
    } finally {
      await page.close();
      await desk.stop();
    }
  }
} finally {
  closeClient();
  await browser.close();
}
printTable("Live view", rows);
