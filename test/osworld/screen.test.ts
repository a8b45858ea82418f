/**
 * The screen routes with OSWorld's shapes: `/screenshot` (PNG at the screen's size), `/screen_size`,
 * `/cursor_position`, `/platform`, the wallpaper, the recording (`/start_recording`,
 * `/end_recording`: an MP4 download), and Werkzeug's 404 and 405 pages.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probeVideo } from "../support/video.js";
import { type OsworldDesktop, postJson, startOsworldDesktop } from "./support.js";

let desk: OsworldDesktop;
beforeAll(async () => {
  desk = await startOsworldDesktop({ width: 800, height: 600 });
}, 60_000);
afterAll(() => desk?.stop());

describe("the screen", () => {
  it("/screenshot is a PNG of the whole screen", async () => {
    const res = await fetch(`${desk.base}/screenshot`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/png");
    const png = Buffer.from(await res.arrayBuffer());
    expect(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).toBe(
      true,
    );
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([800, 600]);
  });

  it("/screen_size, /cursor_position and /platform", async () => {
    const size = await fetch(`${desk.base}/screen_size`, { method: "POST" });
    expect(await size.json()).toEqual({ width: 800, height: 600 });
    await desk.run("xdotool", ["mousemove", "321", "123"]);
    const at = await fetch(`${desk.base}/cursor_position`);
    expect(at.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await at.json()).toEqual([321, 123]);
    const platform = await fetch(`${desk.base}/platform`);
    expect(platform.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await platform.text()).toBe("Linux");
  });

  it("/setup/change_wallpaper sets it and /wallpaper sends it back; 400, 404 for bad paths", async () => {
    const before = await fetch(`${desk.base}/wallpaper`, { method: "POST" });
    expect(before.status).toBe(404);
    expect(await before.text()).toMatch(/Wallpaper file not found/);
    const image = join(desk.dir, "wall.png");
    writeFileSync(image, Buffer.from(await (await fetch(`${desk.base}/screenshot`)).arrayBuffer()));
    const set = await postJson(desk.base, "/setup/change_wallpaper", { path: image });
    expect(set.status).toBe(200);
    expect(await set.text()).toBe("Wallpaper changed successfully");
    const after = await fetch(`${desk.base}/wallpaper`, { method: "POST" });
    expect(after.status).toBe(200);
    expect(after.headers.get("content-type")).toBe("image/png");
    expect(Buffer.from(await after.arrayBuffer()).length).toBeGreaterThan(100);
    expect((await postJson(desk.base, "/setup/change_wallpaper", {})).status).toBe(400);
    const missing = await postJson(desk.base, "/setup/change_wallpaper", { path: "/no/such.png" });
    expect(missing.status).toBe(404);
    expect(await missing.text()).toBe("File not found: /no/such.png");
  });
});

describe("the recording", () => {
  it("records an MP4 between /start_recording and /end_recording, refusing a second start and a stop without one", async () => {
    expect((await fetch(`${desk.base}/end_recording`, { method: "POST" })).status).toBe(400);
    const started = await fetch(`${desk.base}/start_recording`, { method: "POST" });
    expect(started.status).toBe(200);
    expect(await started.json()).toEqual({ status: "success", message: "Started recording successfully." });
    const again = await fetch(`${desk.base}/start_recording`, { method: "POST" });
    expect(again.status).toBe(400);
    expect(await again.json()).toEqual({ status: "error", message: "Recording is already in progress." });
    for (let i = 0; i < 10; i++) await desk.run("xdotool", ["mousemove", String(100 + i * 30), "200"]);
    const ended = await fetch(`${desk.base}/end_recording`, { method: "POST" });
    expect(ended.status).toBe(200);
    expect(ended.headers.get("content-type")).toBe("video/mp4");
    expect(ended.headers.get("content-disposition")).toMatch(/^attachment; filename="recording.mp4"/);
    const video = Buffer.from(await ended.arrayBuffer());
    expect(video.subarray(4, 8).toString()).toBe("ftyp");
    const file = join(desk.dir, "recording.mp4");
    writeFileSync(file, video);
    const probed = await probeVideo(file);
    expect(probed).toMatchObject({ codec: "h264", width: 800, height: 600 });
    const none = await fetch(`${desk.base}/end_recording`, { method: "POST" });
    expect(none.status).toBe(400);
    expect(await none.json()).toEqual({ status: "error", message: "No recording in progress to stop." });
  });
});

describe("unknown routes and methods", () => {
  it("answers Werkzeug's 404 page, and 405 with Allow for a known path asked with another method", async () => {
    const missing = await fetch(`${desk.base}/obs_winagent`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await missing.text()).toMatch(/<title>404 Not Found<\/title>/);
    const wrong = await fetch(`${desk.base}/screenshot`, { method: "POST" });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("allow")).toBe("GET, OPTIONS, HEAD");
  });
});
