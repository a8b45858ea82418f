/**
 * The H.264 live stream when things go wrong, on real desktops (Xvfb): an encoder killed with
 * kill -9 is started again and its viewers go on; viewers that come and go by the hundred leave no
 * encoder and no descriptor behind; a display that dies ends the stream with a clear message; a
 * missing ffmpeg is said in words, and the live view keeps its JPEG frames.
 */

import { mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DesktopServer, startDesktopServer } from "../support/desktop.js";
import { liveEncoders, openFds, SavedStream, StreamSocket } from "../support/live-stream.js";
import { startTestServer } from "../support/server.js";
import { near, pixelAt, probeVideo } from "../support/video.js";

let desk: DesktopServer;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hangar-live-faults-"));
  desk = await startDesktopServer({ width: 640, height: 480 });
  await desk.run("xdotool", ["mousemove", "630", "470"]);
  await desk.run("xsetroot", ["-solid", "#203040"]);
});
afterAll(async () => {
  await desk?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const liveUrl = (server: { url: string }) => `${server.url.replace("http", "ws")}/live`;
const paint = (colour: string) => desk.run("xsetroot", ["-solid", colour]);

describe("an encoder killed with kill -9", () => {
  it("is started again, and its viewers go on", async () => {
    const socket = await StreamSocket.open(liveUrl(desk.server));
    expect(await socket.message("stream")).toMatchObject({ generation: 1 });
    const mp4 = await SavedStream.open(`${desk.server.url}/live.mp4`);
    const [first, ...more] = liveEncoders();
    expect(first).toBeDefined();
    for (const pid of [first, ...more]) process.kill(pid, "SIGKILL");
    // The socket is told how to decode the new encoder's stream, and its packets come.
    const restarted = await socket.until(() =>
      socket.messages.find((m) => m.type === "stream" && m.generation === 2),
    );
    expect(restarted.video.width).toBe(640);
    await expect
      .poll(liveEncoders, { timeout: 15_000 })
      .toSatisfy((pids: number[]) => pids.length === 2 && !pids.includes(first));
    const packetsBefore = socket.packets.length;
    await paint("#ff0000");
    await socket.until(() => socket.packets.length > packetsBefore);
    // The MP4 client's file goes on through the restart: it plays, and comes to the red screen.
    const path = join(dir, "restarted.mp4");
    await mp4.lastFrameNear(path, 100, 100, [255, 0, 0]);
    await mp4.stop(path);
    const video = await probeVideo(path);
    expect(video.codec).toBe("h264");
    expect(near(await pixelAt(path, video.frames.at(-1)!, 100, 100), [255, 0, 0])).toBe(true);
    await socket.close();
    await expect.poll(liveEncoders, { timeout: 10_000 }).toEqual([]);
  });
});

describe("viewers that come and go by the hundred", () => {
  it("leave no encoder and no descriptor behind", async () => {
    // One of each kind first, so that lazily loaded modules and pools are in place.
    const warm = await StreamSocket.open(liveUrl(desk.server));
    await warm.message("stream");
    await warm.close();
    await expect.poll(liveEncoders, { timeout: 10_000 }).toEqual([]);
    const baseline = openFds();
    const sockets = Array.from({ length: 100 }, async (_, i) => {
      const socket = await StreamSocket.open(liveUrl(desk.server), { fps: 10 + (i % 3) });
      // Some go at once, some once the stream has started, some are cut without a goodbye.
      if (i % 3 === 1) await socket.message("stream");
      if (i % 5 === 0) socket.ws.terminate();
      else await socket.close();
    });
    // Players vanish as a closed tab does: their connection is cut (fetch would keep it for reuse).
    const url = new URL(desk.server.url);
    const players = Array.from(
      { length: 50 },
      (_, i) =>
        new Promise<void>((resolve) => {
          const req = request(
            { host: url.hostname, port: url.port, path: `/live.mp4?fps=${10 + (i % 2)}`, agent: false },
            (res) => {
              if (i % 2) res.once("data", () => req.destroy());
              else req.destroy();
            },
          );
          req.once("close", () => resolve());
          req.on("error", () => undefined);
          if (i % 4 === 0) setImmediate(() => req.destroy());
          req.end();
        }),
    );
    await Promise.all([...sockets, ...players]);
    await expect.poll(liveEncoders, { timeout: 20_000 }).toEqual([]);
    await expect.poll(openFds, { timeout: 20_000 }).toBeLessThanOrEqual(baseline);
  });
});

describe("a display that dies", () => {
  it("ends the stream with a clear message; the live view says it has no picture", async () => {
    const own = await startDesktopServer({ width: 320, height: 240 });
    try {
      const socket = await StreamSocket.open(liveUrl(own.server));
      await socket.message("stream");
      const res = await fetch(`${own.server.url}/live.mp4`);
      expect(res.status).toBe(200);
      const ended = res.arrayBuffer().then(
        () => "ended",
        () => "ended",
      );
      own.display.xvfb.kill("SIGKILL");
      const end = await socket.message("stream_end");
      expect(end.error).toMatch(/display|X server|connection/i);
      expect(await ended).toBe("ended");
      // The live view falls back to JPEG frames, which say why there is no picture.
      const noPicture = await socket.until(() =>
        socket.messages.find((m) => /^No picture: /.test(m.error ?? "")),
      );
      expect(noPicture.type).toBe("error");
      await socket.close();
      await expect.poll(liveEncoders, { timeout: 10_000 }).toEqual([]);
      // A new viewer is told at once.
      const late = await fetch(`${own.server.url}/live.mp4`);
      expect(late.status).toBe(503);
      expect((await late.json()).detail).toMatch(/display|X server|connection/i);
    } finally {
      await own.stop();
    }
  });
});

describe("no ffmpeg", () => {
  it("is said in words, and the live view keeps its JPEG frames", async () => {
    const server = await startTestServer({
      desktop: desk.manager.provider,
      recordings: { ffmpeg: "/nonexistent/ffmpeg" },
    });
    try {
      const res = await fetch(`${server.url}/live.mp4`);
      expect(res.status).toBe(503);
      expect((await res.json()).detail).toMatch(/ffmpeg was not found.*apt-get install ffmpeg/);
      const socket = await StreamSocket.open(liveUrl(server));
      expect((await socket.message("stream_end")).error).toMatch(/ffmpeg was not found/);
      await socket.until(
        () => socket.ws.readyState === socket.ws.OPEN && socket.messages.some((m) => m.type === "size"),
      );
      await socket.close();
    } finally {
      await server.close();
    }
  });
});
