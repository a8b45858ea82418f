/**
 * Watching back in the console, in Debian's Chromium: an agent's session is recorded (video and
 * trajectory), then the page lists both, plays the trajectory with its video beside the steps, seeks
 * the video when a step is clicked, and draws the step's click on its screenshot. Page screenshots go
 * to .tmp/console/.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collectProblems, launchBrowser } from "../support/browser.js";
import { type DesktopServer, startDesktopServer } from "../support/desktop.js";

const SHOTS = join(import.meta.dirname, "../../.tmp/console");
const dir = mkdtempSync(join(tmpdir(), "hangar-playback-"));

let desk: DesktopServer;
let browser: Browser;
let page: Page;
const problems: string[] = [];
let trajectoryId: string;
/** When the second click began, in seconds into the video (a step is shown where it began). */
let secondClickAt: number;
/** The video's length as stop_recording said it (the session's waits alone take 2.5 s). */
let recordedSeconds: number;

async function cmd(command: string, params: Record<string, unknown> = {}) {
  const event = await desk.cmd(command, params);
  expect(event, `${command}: ${JSON.stringify(event)}`).toMatchObject({ success: true });
  return event;
}

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  [desk, browser] = await Promise.all([
    startDesktopServer(
      { width: 800, height: 600 },
      {
        server: {
          recordings: { dir: join(dir, "recordings") },
          trajectories: { dir: join(dir, "trajectories") },
        },
      },
    ),
    launchBrowser(),
  ]);
  // The session: a video and a trajectory of the same minute.
  await desk.run("xsetroot", ["-solid", "#202020"]);
  const recording = await cmd("start_recording", { fps: 10 });
  trajectoryId = (await cmd("start_trajectory", { name: "paint and click" })).id;
  await cmd("screenshot", { format: "png", max_width: 400 });
  await cmd("left_click", { x: 200, y: 150 });
  await cmd("run_command", { command: "xsetroot -solid '#c02020'", env: desk.display.env });
  await cmd("wait", { ms: 1500 });
  secondClickAt = (Date.now() - Date.parse(recording.started)) / 1000;
  await cmd("left_click", { x: 600, y: 450 });
  await cmd("run_command", { command: "xsetroot -solid '#2040c0'", env: desk.display.env });
  await cmd("wait", { ms: 1000 });
  await cmd("stop_trajectory");
  recordedSeconds = (await cmd("stop_recording")).duration_s;
  expect(recordedSeconds).toBeGreaterThan(2.5);

  page = await browser.newPage({ viewport: { width: 1400, height: 1200 } });
  collectProblems(page, problems);
  await page.goto(desk.server.url);
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await desk?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("the console's recordings", () => {
  it("lists the trajectory and the video", async () => {
    await expect
      .poll(() => page.textContent("#trajectories"), { timeout: 15_000 })
      .toContain("paint and click");
    expect(await page.textContent("#trajectories")).toMatch(/8 steps · finished/);
    expect(await page.textContent("#recordings")).toMatch(/\.mp4.*s · finished/);
  });

  it("plays the trajectory: the video beside its steps, a step's click seeks and is drawn", async () => {
    await page.click(`#trajectories li[data-id="${trajectoryId}"]`);
    await expect.poll(() => page.locator("#player-steps li").count(), { timeout: 15_000 }).toBe(8);
    expect(await page.textContent("#player-title")).toBe("paint and click — 8 steps");
    // The video loads and plays (H.264 in fragmented MP4, from the server's /files).
    await page.waitForFunction((seconds) => {
      const video = document.getElementById("player-video") as HTMLVideoElement;
      return video.readyState >= 2 && Math.abs(video.duration - seconds) < 0.25;
    }, recordedSeconds);
    const played = await page.evaluate(async () => {
      const video = document.getElementById("player-video") as HTMLVideoElement;
      await video.play();
      await new Promise((resolve) => setTimeout(resolve, 600));
      video.pause();
      return video.currentTime;
    });
    expect(played).toBeGreaterThan(0.2);

    // The second click: the video jumps to it, the page shows the screen the agent clicked on.
    const step = page.locator('#player-steps li[data-step="6"]');
    expect(await step.textContent()).toContain("left_click (600, 450)");
    await step.click();
    await expect.poll(() => step.getAttribute("class")).toContain("selected");
    const at = await page.evaluate(
      () => (document.getElementById("player-video") as HTMLVideoElement).currentTime,
    );
    expect(Math.abs(at - secondClickAt)).toBeLessThan(0.5);
    // The screenshot it had seen is the 400 px one: the marker is at 600/800 and 450/600 of it.
    const marker = page.locator("#player-step .marker");
    await marker.waitFor();
    const style = await marker.evaluate((node) => ({
      left: (node as HTMLElement).style.left,
      top: (node as HTMLElement).style.top,
    }));
    expect(style).toEqual({ left: "75%", top: "75%" });
    // … and drawn there on the page: at three quarters of the image's width and height.
    const box = (await page.locator("#player-step img").boundingBox())!;
    const mark = (await marker.boundingBox())!;
    expect(Math.abs(mark.x + mark.width / 2 - (box.x + box.width * 0.75))).toBeLessThan(3);
    expect(Math.abs(mark.y + mark.height / 2 - (box.y + box.height * 0.75))).toBeLessThan(3);
    const image = await page.locator("#player-step img").evaluate((img) => ({
      width: (img as HTMLImageElement).naturalWidth,
      height: (img as HTMLImageElement).naturalHeight,
    }));
    expect(image).toEqual({ width: 400, height: 300 });
    // The frame shown is the red screen (painted 1.5 s before the click, blue only after it).
    await page.waitForFunction(() => {
      const video = document.getElementById("player-video") as HTMLVideoElement;
      return !video.seeking && video.readyState >= 2;
    });
    const colour = await page.evaluate(() => {
      const video = document.getElementById("player-video") as HTMLVideoElement;
      const canvas = document.createElement("canvas");
      canvas.width = video.videoWidth;
      canvas.height = video.videoHeight;
      const context = canvas.getContext("2d")!;
      context.drawImage(video, 0, 0);
      return [...context.getImageData(700, 100, 1, 1).data.slice(0, 3)];
    });
    expect(colour[0]).toBeGreaterThan(150);
    expect(colour[2]).toBeLessThan(90);
    await page.screenshot({ path: join(SHOTS, "playback.png"), fullPage: true });
    expect(problems).toEqual([]);
  });
});
