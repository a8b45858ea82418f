/**
 * What cua's Python SDK asks for beyond the basics: get_active_window_bounds in `bounds`,
 * set_wallpaper (read back from the screen's pixels), and clear "not supported" answers for
 * diorama_cmd and /responses, listed in /status.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APPS, type DesktopServer, PYTHON, startDesktopServer } from "../support/desktop.js";

let desk: DesktopServer;
beforeAll(async () => {
  desk = await startDesktopServer({ width: 800, height: 600 });
});
afterAll(() => desk?.stop());

/** The colour of one screen pixel, from a PNG screenshot taken through the server. */
async function pixel(x: number, y: number) {
  const shot = await desk.cmd("screenshot", { region: { x, y, width: 1, height: 1 } });
  const { data } = await sharp(Buffer.from(shot.image_data, "base64"))
    .raw()
    .toBuffer({ resolveWithObject: true });
  return [data[0], data[1], data[2]];
}

describe("set_wallpaper", () => {
  it("paints the desktop with the image, scaled to the screen", async () => {
    for (const [name, format, colour] of [
      ["wall.png", "png", { r: 200, g: 30, b: 60 }],
      ["wall.jpg", "jpeg", { r: 20, g: 120, b: 220 }],
    ] as const) {
      const file = join(desk.dir, name);
      await sharp({ create: { width: 64, height: 48, channels: 3, background: colour } })
        .toFormat(format)
        .toFile(file);
      expect(await desk.cmd("set_wallpaper", { path: file })).toMatchObject({ success: true });
      const [r, g, b] = await pixel(790, 590);
      expect(Math.abs(r - colour.r) + Math.abs(g - colour.g) + Math.abs(b - colour.b)).toBeLessThan(15);
    }
  });

  it("says what is wrong with a missing file or one that is not an image", async () => {
    const missing = await desk.cmd("set_wallpaper", { path: join(desk.dir, "nope.png") });
    expect(missing).toMatchObject({ success: false, code: "not_found" });
    const text = join(desk.dir, "notes.txt");
    writeFileSync(text, "not an image");
    const bad = await desk.cmd("set_wallpaper", { path: text });
    expect(bad).toMatchObject({ success: false, code: "invalid_params" });
    expect(bad.error).toMatch(/^Not an image Hangar can read/);
    expect((await desk.cmd("set_wallpaper", { path: desk.dir })).error).toMatch(/Not a regular file/);
  });
});

describe("get_active_window_bounds", () => {
  it("answers in `bounds` as cua's Python SDK reads it, and beside it", async () => {
    desk.spawn(PYTHON, [join(APPS, "entry.py"), join(desk.dir, "e.txt"), "bounds window"]);
    const id = await desk.waitForWindow("bounds window");
    await desk.cmd("activate_window", { window_id: id });
    const reply = await desk.cmd("get_active_window_bounds");
    const geometry = await desk.geometry(id);
    expect(reply.bounds).toEqual(geometry);
    expect({ x: reply.x, y: reply.y, width: reply.width, height: reply.height }).toEqual(geometry);
  });
});

describe("what this server does not do", () => {
  it("answers diorama_cmd and /responses with not supported, and lists them in /status", async () => {
    const diorama = await desk.cmd("diorama_cmd", { action: "launch", arguments: { app_list: ["Safari"] } });
    expect(diorama).toMatchObject({ success: false, code: "not_supported" });
    expect(diorama.error).toMatch(/^diorama_cmd is not supported on this server/);
    const responses = await fetch(`${desk.server.url}/responses`, {
      method: "POST",
      body: JSON.stringify({ model: "m", input: "hi" }),
    });
    expect(responses.status).toBe(501);
    expect(((await responses.json()) as { detail: string }).detail).toMatch(/^Not supported on this server/);
    const status = (await (await fetch(`${desk.server.url}/status`)).json()) as { unsupported: string[] };
    expect(status.unsupported).toEqual(["diorama_cmd", "/responses"]);
  });
});
