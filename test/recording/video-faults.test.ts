/**
 * Recordings when things go wrong: paths that cannot hold a video, a disk that fills up, an encoder
 * that is missing or killed, a server killed with SIGKILL. Each time: a clear answer, the server keeps
 * serving, no encoder is left behind, and what was recorded until then plays.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
import { startCli } from "../support/cli-process.js";
import { postCommand } from "../support/clients.js";
import { descendants, isRunning, waitUntilGone } from "../support/processes.js";
import { startTestServer } from "../support/server.js";
import { near, pixelAt, probeVideo } from "../support/video.js";

let display: VirtualDisplay;
let manager: DesktopManager;
let server: Awaited<ReturnType<typeof startTestServer>>;
let dir: string;
const mounts: string[] = [];

beforeAll(async () => {
  display = await startVirtualDisplay({ width: 640, height: 480, windowManager: false });
  manager = new DesktopManager({ display: display.display });
  dir = mkdtempSync(join(tmpdir(), "hangar-video-faults-"));
  server = await startTestServer({ desktop: manager.provider, recordings: { dir: join(dir, "recordings") } });
});
afterAll(async () => {
  await server?.close();
  await manager?.close();
  await display?.stop();
  for (const mount of mounts) execFileSync("umount", [mount]);
  rmSync(dir, { recursive: true, force: true });
});

async function cmd(command: string, params: Record<string, unknown> = {}) {
  return (await server.cmd(command, params)).event;
}

/** A tmpfs of `size` at a new directory (root in the test container); unmounted after the file. */
function mountTmpfs(name: string, options: string): string {
  const path = join(dir, name);
  mkdirSync(path);
  execFileSync("mount", ["-t", "tmpfs", "-o", options, "tmpfs", path]);
  mounts.push(path);
  return path;
}

/** The encoders (ffmpeg) this test process has started and that still run. */
function encoders() {
  return descendants(process.pid).filter((p) => /(^|\/)ffmpeg /.test(p.args));
}

async function expectServing() {
  expect(await cmd("version")).toMatchObject({ success: true });
  expect((await cmd("recording_status")).recording).toBeNull();
}

/** Fills the screen with noise (a picture no encoder can shrink much), through run_command. */
async function paintNoise(file: string) {
  const pixels = Buffer.from(Array.from({ length: 640 * 480 * 3 }, () => Math.floor(Math.random() * 256)));
  await sharp(pixels, { raw: { width: 640, height: 480, channels: 3 } })
    .png()
    .toFile(file);
  const reply = await cmd("run_command", { command: `xwallpaper --maximize '${file}'`, env: display.env });
  expect(reply.return_code).toBe(0);
}

describe("recording faults", () => {
  it("refuses a path in /proc, naming why", async () => {
    const reply = await cmd("start_recording", { path: "/proc/self/video.mp4" });
    expect(reply).toMatchObject({ success: false, code: "invalid_params" });
    expect(reply.error).toContain("/proc");
    await expectServing();
  });

  it("refuses a directory that cannot be written, and leaves nothing behind", async () => {
    const readOnly = mountTmpfs("read-only", "ro,size=1m");
    const reply = await cmd("start_recording", { path: join(readOnly, "video.mp4") });
    expect(reply).toMatchObject({ success: false, code: "failed" });
    expect(reply.error).toMatch(/^Cannot record: Read-only file system: .*video\.mp4$/);
    const notADirectory = await cmd("start_recording", { path: "/etc/hostname/video.mp4" });
    expect(notADirectory).toMatchObject({ success: false });
    expect(notADirectory.error).toContain("Not a directory");
    expect(encoders()).toEqual([]);
    await expectServing();
  });

  it("says ffmpeg is missing and how to get it, leaving no empty file", async () => {
    const own = await startTestServer({
      desktop: manager.provider,
      recordings: { dir: join(dir, "no-ffmpeg"), ffmpeg: "/nonexistent/ffmpeg" },
    });
    try {
      const path = join(dir, "never.mp4");
      const reply = (await own.cmd("start_recording", { path })).event;
      expect(reply).toMatchObject({ success: false, code: "unavailable" });
      expect(reply.error).toContain("ffmpeg was not found");
      expect(reply.error).toContain("apt-get install ffmpeg");
      expect(existsSync(path)).toBe(false);
      expect((await own.cmd("version")).event.success).toBe(true);
    } finally {
      await own.close();
    }
  });

  it("stops cleanly when the disk fills up, and says so at stop_recording", async () => {
    const small = mountTmpfs("small", "size=160k");
    const path = join(small, "full.mp4");
    const started = await cmd("start_recording", { path, fps: 10, cursor: false });
    expect(started).toMatchObject({ success: true });
    const [encoder] = encoders();
    expect(encoder).toBeDefined();
    // Each noise picture is about 40 KB of H.264: the fourth or fifth cannot fit.
    for (let i = 0; i < 12 && isRunning(encoder.pid); i++) {
      await paintNoise(join(dir, `noise-${i}.png`));
      await cmd("wait", { ms: 300 });
    }
    await vi.waitFor(() => expect(isRunning(encoder.pid)).toBe(false), { timeout: 10_000 });
    await vi.waitFor(async () => expect((await cmd("recording_status")).recording).toBeNull(), {
      timeout: 10_000,
    });
    const stopped = await cmd("stop_recording");
    expect(stopped).toMatchObject({ success: true, path });
    expect(stopped.error).toMatch(/^No space left on device: the disk of .*full\.mp4 is full$/);
    expect(stopped.frames).toBeGreaterThan(0);
    // Once reported, it is not reported again.
    expect(await cmd("stop_recording")).toMatchObject({ success: false, code: "not_found" });
    await expectServing();
    // The next recording (elsewhere) works.
    const next = join(dir, "after-full.mp4");
    expect(await cmd("start_recording", { path: next })).toMatchObject({ success: true });
    expect(await cmd("stop_recording")).toMatchObject({ success: true, path: next });
  }, 60_000);

  it("keeps what was recorded when the encoder is killed, and reports it", async () => {
    const path = join(dir, "killed.mp4");
    expect(await cmd("start_recording", { path })).toMatchObject({ success: true });
    for (const colour of ["#ff0000", "#00ff00", "#0000ff"]) {
      await cmd("run_command", { command: `xsetroot -solid '${colour}'`, env: display.env });
      await cmd("wait", { ms: 700 });
    }
    const [encoder] = encoders();
    process.kill(encoder.pid, "SIGKILL");
    await vi.waitFor(async () => expect((await cmd("recording_status")).recording).toBeNull(), {
      timeout: 10_000,
    });
    const stopped = await cmd("stop_recording");
    expect(stopped.error).toContain("killed (SIGKILL)");
    // Fragments of at most a second: what came before the last second plays.
    const video = await probeVideo(path);
    expect(video.codec).toBe("h264");
    expect(video.frames.length).toBeGreaterThanOrEqual(2);
    expect(video.duration).toBeGreaterThan(1);
    await expectServing();
  });
});

describe("a server killed with SIGKILL while recording", () => {
  it("leaves a playable video up to the kill and no encoder behind", async () => {
    const own = join(dir, "killed-server");
    const cli = await startCli(
      ["serve", "--port", "0", "--virtual-display", "640x480", "--recordings-dir", own],
      { ...process.env, HANGAR_LOG_LEVEL: "info", DISPLAY: "" },
    );
    const started = (await postCommand(cli.url, "start_recording", {})).event;
    expect(started).toMatchObject({ success: true });
    expect(started.path.startsWith(own)).toBe(true);
    const t0 = performance.now();
    const env = { DISPLAY: /"display":"(:\d+)"/.exec(cli.log())?.[1] ?? "" };
    let greenAt = 0;
    for (const colour of ["#ff0000", "#00ff00"]) {
      await postCommand(cli.url, "run_command", { command: `xsetroot -solid '${colour}'`, env });
      greenAt = (performance.now() - t0) / 1000;
      await postCommand(cli.url, "wait", { ms: 600 });
    }
    const children = descendants(cli.pid);
    const encoder = children.find((p) => /(^|\/)ffmpeg /.test(p.args));
    expect(encoder).toBeDefined();
    process.kill(cli.pid, "SIGKILL");
    const killedAt = (performance.now() - t0) / 1000;
    // The encoder reads the end of its input, finishes the file and exits.
    expect(await waitUntilGone(encoder!.pid, 10_000)).toBe(true);
    for (const child of children) if (isRunning(child.pid)) process.kill(child.pid, "SIGKILL");
    // Every change is in it, up to the kill; a still spell at the very end (at most REPEAT_STILL_MS)
    // has no frame of its own yet.
    const video = await probeVideo(started.path);
    expect(video.frames.length).toBeGreaterThanOrEqual(3);
    expect(video.duration).toBeGreaterThan(greenAt - 0.3);
    expect(video.duration).toBeLessThan(killedAt + 0.5);
    expect(near(await pixelAt(started.path, video.duration, 500, 400), [0, 255, 0])).toBe(true);

    // The next start lists it as interrupted.
    const again = await startCli(["serve", "--port", "0", "--no-virtual-display", "--recordings-dir", own]);
    try {
      const list = (await (await fetch(`${again.url}/recordings`)).json()) as {
        recordings: { path: string; state: string }[];
      };
      expect(list.recordings).toEqual([
        expect.objectContaining({ path: started.path, state: "interrupted" }),
      ]);
    } finally {
      await again.stop();
    }
  }, 60_000);
});
