/**
 * Where an agent step's server time goes, phase by phase, in this process (no HTTP): the click and
 * its ordering wait, the MIT-SHM capture, the fourth byte dropped (WebAssembly, `RawImage.rgb`, and
 * sharp's `removeAlpha()` for comparison), the resize to 1280x800, the PNG encoding, base64 and the
 * reply's JSON; and the JPEG q80 of a whole 1080p frame. The screen is changed before each round.
 *
 *   node --import tsx bench/step-profile.ts
 */
import sharp from "sharp";
import { JPEG_OPTIONS, PNG_OPTIONS } from "../src/desktop/screenshot.js";
import { X11Backend } from "../src/desktop/x11/backend.js";
import { median, ms, p95, printMarkdown } from "./lib.js";
import { screenChanger, startScene } from "./scene.js";

const RUNS = 30;
const WARMUP = 3;
const scene = await startScene(1920, 1080);
const backend = await X11Backend.connect(scene.display.display);
sharp.concurrency(2);
sharp.cache(false);
const change = await screenChanger(scene.server.url);
const times = new Map<string, number[]>();
async function time<T>(name: string, fn: () => Promise<T> | T): Promise<T> {
  const start = performance.now();
  const out = await fn();
  const list = times.get(name) ?? [];
  list.push(performance.now() - start);
  times.set(name, list);
  return out;
}
const small = { width: 1280, height: 800, channels: 3 } as const;
try {
  for (let i = 0; i < RUNS + WARMUP; i++) {
    await change();
    await time("click (XTEST requests + one round trip)", () =>
      backend.click("left", 1, { x: 960, y: 1050 }),
    );
    await time("ordering wait (the pointer query after it)", () => backend.cursorPosition());
    const raw = await time("capture (GetImage into SHM, pread, byte swap)", () => backend.capture());
    const { width, height } = raw;
    const input = { raw: { width, height, channels: 4 as const } };
    await time("drop the 4th byte: sharp removeAlpha (before)", () =>
      sharp(raw.data, input).removeAlpha().raw().toBuffer(),
    );
    const rgb = await time("drop the 4th byte: WebAssembly (RawImage.rgb)", () => raw.rgb?.() as Buffer);
    const resized = await time("resize to 1280x800, linear (sharp)", () =>
      sharp(rgb, { raw: { width, height, channels: 3 } })
        .resize(1280, 800, { fit: "fill", kernel: "linear" })
        .raw()
        .toBuffer(),
    );
    const png = await time("PNG of 1280x800, level 2, no filter (sharp)", () =>
      sharp(resized, { raw: small }).png(PNG_OPTIONS).toBuffer(),
    );
    await time("resize + PNG in one sharp pipeline (the server before)", () =>
      sharp(rgb, { raw: { width, height, channels: 3 } })
        .resize(1280, 800, { fit: "fill", kernel: "linear" })
        .png(PNG_OPTIONS)
        .toBuffer(),
    );
    await time("base64 + JSON of the reply", () =>
      JSON.stringify({ tool_result: { content: [{ source: { data: png.toString("base64") } }] } }),
    );
    await time("JPEG q80 of 1920x1080, from RGBX + removeAlpha", () =>
      sharp(raw.data, input)
        .removeAlpha()
        .jpeg({ ...JPEG_OPTIONS, quality: 80 })
        .toBuffer(),
    );
    await time("JPEG q80 of 1920x1080, from RGB", () =>
      sharp(rgb, { raw: { width, height, channels: 3 } })
        .jpeg({ ...JPEG_OPTIONS, quality: 80 })
        .toBuffer(),
    );
  }
  printMarkdown(
    `agent step, phase by phase (in process, ${RUNS} rounds, screen changed before each)`,
    ["phase", "median", "p95"],
    [...times].map(([name, list]) => {
      const timed = list.slice(WARMUP);
      return [name, ms(median(timed)), ms(p95(timed))];
    }),
  );
} finally {
  await backend.close();
  await scene.stop();
}
