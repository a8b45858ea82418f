/**
 * Screenshots against a real Xvfb: a window of known colours at a known place (red, green and blue
 * bands over a white bar) must come out with the right colours at the right pixels, whatever the
 * format, region, scale or capture path.
 */
import { mkdirSync, readdirSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { collectGarbage, IDLE_RELEASE_MS } from "../../src/common/idle.js";
import { takeScreenshot } from "../../src/desktop/screenshot.js";
import { X11Backend } from "../../src/desktop/x11/backend.js";
import { APPS, type DesktopServer, eventually, PYTHON, startDesktopServer } from "../support/desktop.js";

const RED = [255, 0, 0];
const GREEN = [0, 255, 0];
const BLUE = [0, 0, 255];
const WHITE = [255, 255, 255];
const BLACK = [0, 0, 0];
/** Where the screenshots are kept to look at (gitignored). */
const SHOTS = join(import.meta.dirname, "../../.tmp");
mkdirSync(SHOTS, { recursive: true });
/** Where pattern.py puts its 300x200 window. */
const AT = { x: 100, y: 50 };

interface Decoded {
  width: number;
  height: number;
  pixel(x: number, y: number): number[];
}

async function decode(base64: string): Promise<Decoded> {
  const { data, info } = await sharp(Buffer.from(base64, "base64"))
    .removeAlpha()
    .raw()
    .toBuffer({ resolveWithObject: true });
  return {
    width: info.width,
    height: info.height,
    pixel: (x, y) => [...data.subarray((y * info.width + x) * 3, (y * info.width + x) * 3 + 3)],
  };
}

function near(actual: number[], expected: number[], tolerance: number) {
  return actual.every((v, i) => Math.abs(v - expected[i]) <= tolerance);
}

describe("screenshots (X11)", () => {
  let desk: DesktopServer;

  beforeAll(async () => {
    desk = await startDesktopServer({ width: 1024, height: 768 });
    desk.spawn(PYTHON, [join(APPS, "pattern.py"), String(AT.x), String(AT.y)]);
    // Wait until the pattern is on screen (its top-left pixel turns red).
    await eventually(async () => {
      const shot = await desk.cmd("screenshot", { region: { x: AT.x, y: AT.y, width: 1, height: 1 } });
      return shot.success && near((await decode(shot.image_data)).pixel(0, 0), RED, 0);
    }, 15_000);
  });
  afterAll(() => desk?.stop());

  /** The pattern's colours at its corners and bands, in the coordinates of an image. */
  function expectPattern(image: Decoded, offset: { x: number; y: number }, tolerance = 0) {
    const at = (x: number, y: number) => image.pixel(x - offset.x, y - offset.y);
    const checks: [number, number, number[]][] = [
      [AT.x, AT.y, RED],
      [AT.x + 99, AT.y + 179, RED],
      [AT.x + 100, AT.y, GREEN],
      [AT.x + 199, AT.y + 100, GREEN],
      [AT.x + 200, AT.y, BLUE],
      [AT.x + 299, AT.y + 179, BLUE],
      [AT.x, AT.y + 180, WHITE],
      [AT.x + 299, AT.y + 199, WHITE],
    ];
    for (const [x, y, colour] of checks) {
      expect(near(at(x, y), colour, tolerance), `pixel ${x},${y} is ${at(x, y)}, expected ${colour}`).toBe(
        true,
      );
    }
  }

  it("captures the whole screen as PNG with the right colours in the right place", async () => {
    const shot = await desk.cmd("screenshot");
    expect(shot).toMatchObject({ success: true, format: "png", width: 1024, height: 768, scale: 1 });
    expect(shot.image_data).not.toMatch(/^data:/);
    const image = await decode(shot.image_data);
    expect([image.width, image.height]).toEqual([1024, 768]);
    expectPattern(image, { x: 0, y: 0 });
    // Just outside the window: the black root window, not a shifted copy of the pattern.
    expect(image.pixel(AT.x - 1, AT.y + 10)).toEqual(BLACK);
    expect(image.pixel(AT.x + 10, AT.y - 1)).toEqual(BLACK);
    expect(image.pixel(AT.x + 300, AT.y + 10)).toEqual(BLACK);
  });

  it("draws the pointer with cursor: true, where the pointer is, at the image's scale", async () => {
    // Over the green band: the arrow's black body shows a few pixels right of and below its tip.
    const tip = { x: AT.x + 150, y: AT.y + 60 };
    await desk.cmd("move_cursor", tip);
    const plain = await decode((await desk.cmd("screenshot")).image_data);
    expect(plain.pixel(tip.x + 3, tip.y + 8)).toEqual(GREEN);
    const shot = await desk.cmd("screenshot", { cursor: true });
    expect(shot).toMatchObject({ success: true, width: 1024, height: 768 });
    const drawn = await decode(shot.image_data);
    expect(near(drawn.pixel(tip.x + 3, tip.y + 8), BLACK, 40)).toBe(true);
    // Only around the pointer: the rest is the pattern as captured.
    expectPattern(drawn, { x: 0, y: 0 });
    // Half size: the arrow is drawn where the pointer is in the smaller image.
    const half = await decode((await desk.cmd("screenshot", { cursor: true, scale: 0.5 })).image_data);
    expect(near(half.pixel(tip.x / 2 + 3, tip.y / 2 + 8), BLACK, 40)).toBe(true);
    // A pointer at the screen's corner is cut at the edge; a region it is not in is unchanged.
    await desk.cmd("move_cursor", { x: 1020, y: 764 });
    const edge = await desk.cmd("screenshot", { cursor: true, format: "jpeg" });
    expect(edge).toMatchObject({ success: true, width: 1024, height: 768 });
    const region = await desk.cmd("screenshot", {
      cursor: true,
      region: { x: AT.x, y: AT.y, width: 300, height: 200 },
    });
    expectPattern(await decode(region.image_data), AT, 0);
    writeFileSync(join(SHOTS, "screenshot-cursor.png"), Buffer.from(shot.image_data, "base64"));
  });

  it("captures a region", async () => {
    const shot = await desk.cmd("screenshot", { region: { x: AT.x, y: AT.y, width: 300, height: 200 } });
    expect(shot).toMatchObject({ success: true, width: 300, height: 200, scale: 1 });
    expectPattern(await decode(shot.image_data), AT);
  });

  it("encodes JPEG and WebP with the right colours", async () => {
    for (const format of ["jpeg", "jpg", "WEBP"]) {
      const shot = await desk.cmd("screenshot", { format, quality: 90 });
      expect(shot.success, shot.error).toBe(true);
      expect(shot.format).toBe(format === "WEBP" ? "webp" : "jpeg");
      const inset = await decode(shot.image_data);
      // Lossy: look a few pixels inside each band.
      expect(near(inset.pixel(AT.x + 50, AT.y + 90), RED, 40)).toBe(true);
      expect(near(inset.pixel(AT.x + 150, AT.y + 90), GREEN, 40)).toBe(true);
      expect(near(inset.pixel(AT.x + 250, AT.y + 90), BLUE, 40)).toBe(true);
    }
  });

  it("scales down to max_width and maps coordinates back to the screen", async () => {
    const shot = await desk.cmd("screenshot", { max_width: 512 });
    expect(shot).toMatchObject({ success: true, width: 512, height: 384, scale: 0.5 });
    const image = await decode(shot.image_data);
    expect(near(image.pixel((AT.x + 50) / 2, (AT.y + 90) / 2), RED, 8)).toBe(true);
    expect(near(image.pixel((AT.x + 250) / 2, (AT.y + 90) / 2), BLUE, 8)).toBe(true);
    expect(near(image.pixel(10, 300), BLACK, 8)).toBe(true);

    const id = shot.screenshot_id;
    const toScreen = await desk.cmd("to_screen_coordinates", { x: 75, y: 70, screenshot_id: id });
    expect(toScreen.coordinates).toEqual([150, 140]);
    const toShot = await desk.cmd("to_screenshot_coordinates", { x: 150, y: 140, screenshot_id: id });
    expect(toShot.coordinates).toEqual([75, 70]);
    const bySize = { x: 75, y: 70, screenshot_width: 512, screenshot_height: 384 };
    expect((await desk.cmd("to_screen_coordinates", bySize)).coordinates).toEqual([150, 140]);

    const scaled = await desk.cmd("screenshot", { scale: 0.25, format: "jpeg" });
    expect(scaled).toMatchObject({ success: true, width: 256, height: 192, scale: 0.25 });
  });

  it("reports the screen size as xdpyinfo does", async () => {
    const event = await desk.cmd("get_screen_size");
    expect(event.size).toEqual({ width: 1024, height: 768 });
    expect(await desk.run("xdpyinfo", [])).toContain("dimensions:    1024x768 pixels");
  });

  it("answers a repeat screenshot of an unchanged screen with the same image, and sees a change", async () => {
    const first = await desk.cmd("screenshot");
    const started = performance.now();
    const again = await desk.cmd("screenshot");
    const repeatMs = performance.now() - started;
    expect(again.image_data).toBe(first.image_data);
    expect(repeatMs).toBeLessThan(250);
    // JPEG keeps the strips of its last encoding and encodes again only those that change.
    const firstJpeg = await decode(
      (await desk.cmd("screenshot", { format: "jpeg", quality: 90 })).image_data,
    );
    expect(near(firstJpeg.pixel(AT.x + 50, AT.y + 90), RED, 40)).toBe(true);

    desk.spawn(PYTHON, [join(APPS, "pattern.py"), "600", "400"]);
    const changed = await eventually(async () => {
      const shot = await desk.cmd("screenshot");
      return near((await decode(shot.image_data)).pixel(650, 450), RED, 0) ? shot : null;
    }, 15_000);
    expect(changed.image_data).not.toBe(first.image_data);
    const jpeg = await decode((await desk.cmd("screenshot", { format: "jpeg", quality: 90 })).image_data);
    expect(near(jpeg.pixel(650, 450), RED, 40)).toBe(true);
    expect(near(jpeg.pixel(AT.x + 150, AT.y + 90), GREEN, 40)).toBe(true);
    expect(near(jpeg.pixel(AT.x + 250, AT.y + 90), BLUE, 40)).toBe(true);
  });

  it("serves concurrent screenshots in different formats and sizes", async () => {
    const requests = [
      {},
      { format: "jpeg" },
      { max_width: 256 },
      { region: { x: AT.x, y: AT.y, width: 300, height: 200 } },
    ];
    const shots = await Promise.all(requests.map((params) => desk.cmd("screenshot", params)));
    expect(shots.map((s) => [s.success, s.width, s.height])).toEqual([
      [true, 1024, 768],
      [true, 1024, 768],
      [true, 256, 192],
      [true, 300, 200],
    ]);
    expectPattern(await decode(shots[3].image_data), AT);
  });

  it("captures the same pixels through the core GetImage path", async () => {
    const core = await X11Backend.connect(desk.display.display, { useShm: false });
    try {
      expect(core.captureMethod).toBe("core");
      const raw = await core.capture({ x: AT.x, y: AT.y, width: 300, height: 200 });
      const png = await sharp(raw.data, {
        raw: { width: raw.width, height: raw.height, channels: raw.channels },
      })
        .removeAlpha()
        .png()
        .toBuffer();
      expectPattern(await decode(png.toString("base64")), AT);
    } finally {
      await core.close();
    }
  });

  it("gives a capture's pixels as packed R,G,B, a range of rows at a time, equal to its RGBX less the 4th byte", async () => {
    for (const useShm of [true, false]) {
      const backend = await X11Backend.connect(desk.display.display, { useShm });
      try {
        const raw = await backend.capture({ x: AT.x - 10, y: AT.y - 10, width: 333, height: 221 });
        const expected = await sharp(raw.data, { raw: { width: 333, height: 221, channels: 4 } })
          .removeAlpha()
          .raw()
          .toBuffer();
        const rowBytes = 333 * 3;
        // A range first: those rows are made, the rest need not be yet.
        const part = raw.rgb?.(100, 50) as Buffer;
        expect(
          part
            .subarray(100 * rowBytes, 150 * rowBytes)
            .equals(expected.subarray(100 * rowBytes, 150 * rowBytes)),
        ).toBe(true);
        // Then the whole, around the range already made.
        expect(raw.rgb?.().equals(expected)).toBe(true);
        const shot = await sharp(raw.rgb?.() as Buffer, { raw: { width: 333, height: 221, channels: 3 } })
          .png()
          .toBuffer();
        expectPattern(await decode(shot.toString("base64")), { x: AT.x - 10, y: AT.y - 10 });
      } finally {
        await backend.close();
      }
    }
  });

  it("reads again only the rows DAMAGE reports changed, and its captures stay equal to fresh ones", async () => {
    const kept = await X11Backend.connect(desk.display.display);
    /** A whole capture by a connection of its own (nothing to reuse), as RGB. */
    const fresh = async () => {
      const backend = await X11Backend.connect(desk.display.display);
      try {
        return Buffer.from((await backend.capture()).rgb?.() as Buffer);
      } finally {
        await backend.close();
      }
    };
    const same = async () => {
      const raw = await kept.capture();
      return raw.rgb?.().equals(await fresh()) === true;
    };
    try {
      expect(await same()).toBe(true);
      // Windows appearing and going in other rows, each change seen by two captures in turn
      // (each buffer holds the capture before the last).
      for (const [x, y] of [
        [600, 400],
        [20, 560],
        [650, 20],
      ]) {
        const window = desk.spawn(PYTHON, [join(APPS, "pattern.py"), String(x), String(y)]);
        const at = ((y + 5) * 1024 + x + 5) * 3;
        await eventually(async () => near([...(await fresh()).subarray(at, at + 3)], RED, 0));
        await eventually(same, 5_000);
        window.kill();
        await eventually(same, 5_000);
      }
    } finally {
      await kept.close();
    }
  });

  it("rejects an unknown format and a region off the screen, naming them", async () => {
    const format = await desk.cmd("screenshot", { format: "bmp" });
    expect(format).toMatchObject({ success: false, code: "invalid_params" });
    expect(format.error).toContain("format");
    const region = await desk.cmd("screenshot", { region: { x: 5000, y: 0, width: 10, height: 10 } });
    expect(region).toMatchObject({ success: false, code: "invalid_params" });
    expect(region.error).toContain("region");
  });

  it("lets go of its last capture, screenshot and shared segment once idle: nothing keeps their pixels", async () => {
    const backend = await X11Backend.connect(desk.display.display);
    /** This process's descriptors of capture segments (unlinked /dev/shm files). */
    const segments = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`).includes(`hangar-capture-${process.pid}-`);
        } catch {
          return false;
        }
      }).length;
    try {
      // Made in a function of their own, so that only the weak references outlive it here.
      const [pixels, shot] = await (async () => {
        const raw = await backend.capture();
        const png = await takeScreenshot(backend, { format: "png", quality: 80 });
        return [new WeakRef(raw.data.buffer), new WeakRef(png)];
      })();
      // The 1024x768 capture is 3 MB, and the server may run for months between two screenshots.
      await vi.waitFor(
        () => {
          collectGarbage();
          // Booleans: a failed assertion holding the objects would itself keep them alive.
          expect({ pixels: pixels.deref() === undefined, shot: shot.deref() === undefined }).toEqual({
            pixels: true,
            shot: true,
          });
        },
        { timeout: IDLE_RELEASE_MS + 15_000, interval: 500 },
      );
      expect(segments()).toBe(0);
      // The next capture attaches a segment again and reads the screen afresh.
      const again = await backend.capture();
      expect(segments()).toBe(1);
      const fresh = await X11Backend.connect(desk.display.display);
      try {
        expect(again.rgb?.().equals((await fresh.capture()).rgb?.() as Buffer)).toBe(true);
      } finally {
        await fresh.close();
      }
    } finally {
      await backend.close();
    }
  }, 30_000);
});
