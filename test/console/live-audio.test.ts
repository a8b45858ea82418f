/**
 * The desktop's sound, on a real desktop with its own PulseAudio null sink: a tone a program plays
 * there is in the live stream (`/live.mp4`'s AAC track, the console page's decoded sound) and in a
 * recording's audio track, at the frequency it was played. Frequencies are measured from the
 * decoded samples (zero crossings of a pure tone), as a person would hear the pitch.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser } from "../support/browser.js";
import { type DesktopServer, startDesktopServer } from "../support/desktop.js";
import { liveEncoders, SavedStream } from "../support/live-stream.js";
import { probeVideo } from "../support/video.js";

const execFileAsync = promisify(execFile);

let desk: DesktopServer;
let browser: Browser;
let dir: string;
let tone: ChildProcess | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hangar-live-audio-"));
  [desk, browser] = await Promise.all([
    startDesktopServer({ width: 640, height: 480, audio: true }, { server: { recordings: { dir } } }),
    launchBrowser(),
  ]);
}, 60_000);
afterAll(async () => {
  tone?.kill("SIGKILL");
  await browser?.close();
  await desk?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A program on the desktop playing a sine tone into its sound server until stopped. */
function playTone(hz: number): ChildProcess {
  tone?.kill("SIGKILL");
  tone = spawn(
    "ffmpeg",
    [
      "-v",
      "error",
      "-re",
      "-f",
      "lavfi",
      "-i",
      `sine=frequency=${hz}:sample_rate=48000`,
      "-f",
      "pulse",
      "tone",
    ],
    { env: desk.env, stdio: "ignore" },
  );
  return tone;
}

/** A pure tone's frequency from its samples: zero crossings over time; 0 for silence. */
function frequency(samples: Float32Array, sampleRate: number): number {
  let peak = 0;
  for (const s of samples) peak = Math.max(peak, Math.abs(s));
  if (peak < 0.01) return 0;
  let crossings = 0;
  for (let i = 1; i < samples.length; i++) if (samples[i - 1] < 0 !== samples[i] < 0) crossings++;
  return (crossings / 2) * (sampleRate / samples.length);
}

/**
 * A file's sound decoded (ffmpeg), mono at 48 kHz: `seconds` of it before its last tenth of a second
 * (where the encoder's last frame is padded).
 */
async function lastSound(path: string, seconds: number): Promise<Float32Array> {
  const { stdout } = await execFileAsync(
    "ffmpeg",
    ["-v", "error", "-i", path, "-vn", "-ac", "1", "-ar", "48000", "-f", "f32le", "pipe:1"],
    { encoding: "buffer", maxBuffer: 256 * 1024 * 1024 },
  );
  const all = new Float32Array(stdout.buffer, stdout.byteOffset, stdout.length / 4);
  const end = all.length - 4800;
  return all.slice(Math.max(0, end - seconds * 48000), end);
}

async function audioCodec(path: string): Promise<string> {
  const { stdout } = await execFileAsync("ffprobe", [
    ...["-v", "error", "-select_streams", "a:0", "-show_entries", "stream=codec_name"],
    ...["-of", "csv=p=0", path],
  ]);
  return stdout.trim();
}

describe("the desktop's sound", () => {
  it("is in /live.mp4 as an AAC track, at the frequency played", async () => {
    playTone(440);
    const mp4 = await SavedStream.open(`${desk.server.url}/live.mp4`);
    expect(mp4.response.status).toBe(200);
    const path = join(dir, "live.mp4");
    // The sound starts a second or two after the stream (the null sink's first block): the stream
    // is read until its last half second of sound is the tone.
    const heard = async () => {
      mp4.save(path);
      return frequency(await lastSound(path, 0.5).catch(() => new Float32Array()), 48000);
    };
    await expect
      .poll(heard, { timeout: 20_000, interval: 250 })
      .toSatisfy((hz: number) => Math.abs(hz - 440) < 5);
    await mp4.stop(path);
    expect((await probeVideo(path)).codec).toBe("h264");
    expect(await audioCodec(path)).toBe("aac");
    await expect.poll(liveEncoders, { timeout: 10_000 }).toEqual([]);
  });

  it("plays in the console when the person turns Sound on, at the frequency played", async () => {
    playTone(880);
    const page = await browser.newPage();
    await page.goto(desk.server.url);
    await expect
      .poll(() => page.evaluate(() => (window as any).hangarLive.streaming), { timeout: 20_000 })
      .toBe(true);
    await page.check("#sound");
    const heard = () =>
      page.evaluate(() => {
        const player = (window as any).hangarLive.player;
        return {
          rate: player.soundRate as number,
          samples: [...(player.soundSamples() as Float32Array).slice(-24000)],
        };
      });
    await expect
      .poll(
        async () => {
          const { rate, samples } = await heard();
          return rate ? frequency(Float32Array.from(samples), rate) : 0;
        },
        { timeout: 20_000 },
      )
      .toSatisfy((hz: number) => Math.abs(hz - 880) < 15);
    await page.close();
  });

  it("is a recording's audio track, at the frequency played", async () => {
    playTone(660);
    const started = (await desk.server.cmd("start_recording", { path: join(dir, "sound.mp4") })).event;
    expect(started.success).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 3500));
    const stopped = (await desk.server.cmd("stop_recording", {})).event;
    expect(stopped).toMatchObject({ success: true });
    const path = join(dir, "sound.mp4");
    expect(await audioCodec(path)).toBe("aac");
    expect(frequency(await lastSound(path, 0.5), 48000)).toBeCloseTo(660, -1);
    // Without it when asked.
    await desk.server.cmd("start_recording", { path: join(dir, "silent.mp4"), audio: false });
    await new Promise((resolve) => setTimeout(resolve, 500));
    await desk.server.cmd("stop_recording", {});
    expect(await audioCodec(join(dir, "silent.mp4"))).toBe("");
  });
});
