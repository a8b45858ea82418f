/**
 * Where an agent step's server time goes, phase by phase, in this process (no HTTP): the click and
 * its ordering wait, the MIT-SHM capture, the alpha drop, the resize to 1280x800, the PNG encoding
 * and base64; and the JPEG q80 of a whole 1080p frame. The screen is changed before each round.
 */
import sharp from "sharp";
import { JPEG_OPTIONS, PNG_OPTIONS } from "../src/desktop/screenshot.js";
import { X11Backend } from "../src/desktop/x11/backend.js";
import { median, ms, p95, printMarkdown } from "./lib.js";
import { screenChanger, startScene } from "./scene.js";

const RUNS = Number(process.env.RUNS ?? 30);
const scene = await startScene(1920, 1080);
const backend = await X11Backend.connect(scene.display.display);
sharp.concurrency(2);
sharp.cache(false);
const change = await screenChanger(scene.server.url);
const times: Record<string, number[]> = {};
const time = async <T>(name: string, fn: () => Promise<T> | T): Promise<T> => {
  const start = performance.now();
  const out = await fn();
  (times[name] ??= []).push(performance.now() - start);
  return out;
};
try {
  for (let i = 0; i < RUNS + 3; i++) {
    await change();
    await time("click (X requests + sync)", () => backend.click("left", 1, { x: 640, y: 1070 }));
    await time("ordering wait (cursor query after the click)", () => backend.cursorPosition());
    const raw = await time("capture (MIT-SHM GetImage + pread + swap32)", () => backend.capture());
    const { width, height } = raw;
    const rgb = await time("drop alpha (sharp → raw RGB copy)", () =>
      sharp(raw.data, { raw: { width, height, channels: 4 } })
        .removeAlpha()
        .raw()
        .toBuffer(),
    );
    const small = await time("resize 1920x1080 → 1280x800 linear (raw)", () =>
      sharp(rgb, { raw: { width, height, channels: 3 } })
        .resize(1280, 800, { fit: "fill", kernel: "linear" })
        .raw()
        .toBuffer(),
    );
    const png = await time("PNG level 2 of 1280x800", () =>
      sharp(small, { raw: { width: 1280, height: 800, channels: 3 } })
        .png(PNG_OPTIONS)
        .toBuffer(),
    );
    await time("drop+resize+PNG as the server does (two pipelines)", async () => {
      const rgb2 = await sharp(raw.data, { raw: { width, height, channels: 4 } })
        .removeAlpha()
        .raw()
        .toBuffer();
      return sharp(rgb2, { raw: { width, height, channels: 3 } })
        .resize(1280, 800, { fit: "fill", kernel: "linear" })
        .png(PNG_OPTIONS)
        .toBuffer();
    });
    await time("base64 of the PNG", () => png.toString("base64"));
    await time("JPEG q80 of 1920x1080 (one sharp call, RGBX input)", () =>
      sharp(raw.data, { raw: { width, height, channels: 4 } })
        .removeAlpha()
        .jpeg({ ...JPEG_OPTIONS, quality: 80 })
        .toBuffer(),
    );
    await time("JPEG q80 of 1920x1080 from RGB", () =>
      sharp(rgb, { raw: { width, height, channels: 3 } })
        .jpeg({ ...JPEG_OPTIONS, quality: 80 })
        .toBuffer(),
    );
  }
  for (const list of Object.values(times)) list.splice(0, 3);
  printMarkdown(
    "agent step, phase by phase (in process)",
    ["phase", "median", "p95"],
    Object.entries(times).map(([name, list]) => [name, ms(median(list)), ms(p95(list))]),
  );
} finally {
  await backend.close();
  await scene.stop();
}
