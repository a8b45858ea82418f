/**
 * Where an agent step's server time goes, phase by phase, in this process (no HTTP), in both scenes
 * (bench/scene.ts): one character typed into a text field, and a whole text-filled 1080p screen whose
 * background is repainted before each round. Phases: the click and its ordering wait, the MIT-SHM
 * capture, the fourth byte dropped (WebAssembly `RawImage.rgb`), a whole resize to 1280x800 and a
 * whole PNG and JPEG by sharp (for comparison), the server's own path (`takeScreenshot`: strips and
 * bands, redone where the screen changed) for the step's 1280x800 PNG and the 1080p JPEG q80, and
 * base64 + JSON of the reply.
 *
 *   node --import tsx bench/step-profile.ts [--runs 30]
 */
import { parseArgs } from "node:util";
import sharp from "sharp";
import { JPEG_OPTIONS, PNG_OPTIONS, takeScreenshot } from "../src/desktop/screenshot.js";
import { X11Backend } from "../src/desktop/x11/backend.js";
import { machineLoad, median, ms, p95, printMarkdown } from "./lib.js";
import { screenChanger, startScene, wholeScreenChanger } from "./scene.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "30" } } });
const RUNS = Number(values.runs);
const WARMUP = 3;
const scene = await startScene(1920, 1080);
const backend = await X11Backend.connect(scene.display.display);
sharp.concurrency(2);
sharp.cache(false);
const small = { width: 1280, height: 800, channels: 3 } as const;
const stepShot = { format: "png", quality: 80, size: { width: 1280, height: 800 } } as const;
const jpegShot = { format: "jpeg", quality: 80 } as const;
const loads: string[] = [machineLoad()];

async function profile(change: () => Promise<unknown>) {
  const times = new Map<string, number[]>();
  async function time<T>(name: string, fn: () => Promise<T> | T): Promise<T> {
    const start = performance.now();
    const out = await fn();
    const list = times.get(name) ?? [];
    list.push(performance.now() - start);
    times.set(name, list);
    return out;
  }
  for (let i = 0; i < RUNS + WARMUP; i++) {
    await change();
    await time("click (XTEST requests + one round trip)", () =>
      backend.click("left", 1, { x: 960, y: 1050 }),
    );
    await time("ordering wait (the pointer query after it)", () => backend.cursorPosition());
    const shot = await time("server: step's 1280x800 PNG (takeScreenshot: capture, bands, strips)", () =>
      takeScreenshot(backend, stepShot),
    );
    await time("base64 + JSON of the reply", () =>
      JSON.stringify({ tool_result: { content: [{ source: { data: shot.data.toString("base64") } }] } }),
    );
    await change();
    await time("server: JPEG q80 1920x1080 (takeScreenshot: capture, strips)", () =>
      takeScreenshot(backend, jpegShot),
    );
    await change();
    const raw = await time("capture (GetImage into SHM, pread, byte swap)", () => backend.capture());
    const { width, height } = raw;
    const rgb = await time("drop the 4th byte: WebAssembly (RawImage.rgb)", () => raw.rgb?.() as Buffer);
    const input = { raw: { width, height, channels: 3 as const } };
    const resized = await time("whole resize to 1280x800, linear (sharp)", () =>
      sharp(rgb, input).resize(1280, 800, { fit: "fill", kernel: "linear" }).raw().toBuffer(),
    );
    await time("whole PNG of 1280x800, level 2, no filter (sharp)", () =>
      sharp(resized, { raw: small }).png(PNG_OPTIONS).toBuffer(),
    );
    await time("whole JPEG q80 of 1920x1080 (sharp)", () =>
      sharp(rgb, input)
        .jpeg({ ...JPEG_OPTIONS, quality: 80 })
        .toBuffer(),
    );
  }
  loads.push(machineLoad());
  return times;
}

try {
  const oneCharacter = await profile(await screenChanger(scene.server.url));
  const whole = await wholeScreenChanger(scene.display.display);
  let wholeScreen: Map<string, number[]>;
  try {
    wholeScreen = await profile(whole.change);
  } finally {
    whole.stop();
  }
  const cell = (list: number[] | undefined) => {
    const timed = (list ?? []).slice(WARMUP);
    return `${ms(median(timed))} (p95 ${ms(p95(timed))})`;
  };
  printMarkdown(
    `agent step, phase by phase (in process, ${RUNS} rounds, the screen changed before each call); loads: ${loads.join(" → ")}`,
    ["phase", "one character typed", "whole screen repainted"],
    [...oneCharacter.keys()].map((name) => [name, cell(oneCharacter.get(name)), cell(wholeScreen.get(name))]),
  );
} finally {
  await backend.close();
  await scene.stop();
}
