import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import sharp, { type PngOptions } from "sharp";
import { PNG_OPTIONS, type ScreenshotOptions, takeScreenshot } from "../src/desktop/screenshot.js";
import { X11Backend } from "../src/desktop/x11/backend.js";
import { closeClient, post, timedPost } from "./client.js";
import { printTable, type Row, timeIt } from "./lib.js";
import { activate, MIXED, screenChanger, startScene, timeWithSetup } from "./scene.js";

const RUNS = 30;

/** A row for one command: timed until its reply has arrived; each reply is checked afterwards. */
async function commandRow(
  url: string,
  name: string,
  command: string,
  params: unknown,
  options: { setup?: () => Promise<unknown>; target?: string; note?: string } = {},
): Promise<Row> {
  const call = timedPost(url, command, params);
  const row = options.setup
    ? await timeWithSetup(name, RUNS, options.setup, call.run, options)
    : await timeIt(name, call.run, { runs: RUNS, target: options.target, note: options.note });
  call.check();
  return row;
}

async function kib(url: string, params: unknown) {
  const shot = await post(url, "screenshot", params);
  return `${shot.width}x${shot.height}, ${Math.round(Buffer.from(shot.image_data, "base64").length / 1024)} KiB`;
}

/** PNG encoder settings on the same 1920x1080 capture (encoding only, no capture or HTTP). */
async function pngSettings(display: string): Promise<Row[]> {
  const backend = await X11Backend.connect(display);
  try {
    const raw = await backend.capture();
    const input = () =>
      sharp(raw.data, {
        raw: { width: raw.width, height: raw.height, channels: raw.channels },
      }).removeAlpha();
    const settings: [string, PngOptions][] = [
      ["sharp default (level 6, adaptive filtering)", { compressionLevel: 6, adaptiveFiltering: true }],
      ["level 6, no filtering", { compressionLevel: 6, adaptiveFiltering: false }],
      ["level 3, no filtering", { compressionLevel: 3, adaptiveFiltering: false }],
      ["level 2, no filtering (chosen)", { ...PNG_OPTIONS }],
      ["level 1, no filtering", { compressionLevel: 1, adaptiveFiltering: false }],
    ];
    const rows: Row[] = [];
    for (const [name, options] of settings) {
      const size = (await input().png(options).toBuffer()).length;
      rows.push(
        await timeIt(name, () => input().png(options).toBuffer(), {
          runs: 15,
          warmup: 2,
          note: `${Math.round(size / 1024)} KiB`,
        }),
      );
    }
    return rows;
  } finally {
    await backend.close();
  }
}

/**
 * Server time of a changed 1920x1080 screen: capture, encoding and base64 as the `screenshot`
 * command does them, in this process (no HTTP), with the screen changed before each.
 */
async function serverTimes(display: string, setup: () => Promise<unknown>): Promise<Row[]> {
  const backend = await X11Backend.connect(display);
  try {
    const formats: [string, ScreenshotOptions, string][] = [
      ["JPEG q80", { format: "jpeg", quality: 80 }, "≤ 12 ms"],
      ["PNG", { format: "png", quality: 95 }, ""],
      ["WebP q80", { format: "webp", quality: 80 }, ""],
    ];
    const rows: Row[] = [];
    for (const [name, options, target] of formats) {
      rows.push(
        await timeWithSetup(
          `capture + encode, ${name}`,
          RUNS,
          setup,
          () => takeScreenshot(backend, options),
          {
            target,
          },
        ),
      );
    }
    return rows;
  } finally {
    await backend.close();
  }
}

const encoderRows: Row[] = [];
const serverRows: Row[] = [];

async function main() {
  const rows: Row[] = [];
  const full = await startScene(1920, 1080);
  try {
    const url = full.server.url;
    // Types into the GTK entry before each fresh capture, so that nothing is served from the reuse cache.
    const setup = await screenChanger(url);
    const jpeg80 = { format: "jpeg", quality: 80 };
    const to1280 = { max_width: 1280, max_height: 800 };
    rows.push(
      await commandRow(
        url,
        "screenshot PNG 1920x1080",
        "screenshot",
        {},
        {
          setup,
          target: "≤ 40 ms",
          note: `${await kib(url, {})}, zlib level ${PNG_OPTIONS.compressionLevel}`,
        },
      ),
      await commandRow(url, "screenshot JPEG q80 1920x1080", "screenshot", jpeg80, {
        setup,
        target: "≤ 20 ms",
        note: await kib(url, jpeg80),
      }),
      await commandRow(url, "screenshot PNG 1920x1080 scaled to 1280 wide", "screenshot", to1280, {
        setup,
        note: await kib(url, to1280),
      }),
    );
    await post(url, "screenshot");
    rows.push(
      await commandRow(
        url,
        "repeat screenshot PNG, unchanged screen",
        "screenshot",
        {},
        { target: "≤ 5 ms" },
      ),
      await commandRow(url, "left_click at x,y", "left_click", { x: 960, y: 1000 }, { target: "≤ 3 ms" }),
      await commandRow(url, "move_cursor", "move_cursor", { x: 700, y: 900 }, { target: "≤ 2 ms" }),
    );

    // Typing into a raw-mode recorder in an xterm; the bytes it received must be exactly the text.
    await activate(url, "typing target");
    const before = readFileSync(join(full.dir, "typed.bin")).length;
    const typing = timedPost(url, "type_text", { text: MIXED });
    let typed = 0;
    const row = await timeIt(
      "type_text, 100 mixed characters",
      async () => {
        await typing.run();
        typed++;
      },
      { runs: RUNS, warmup: 3, target: "≤ 150 ms" },
    );
    typing.check();
    await sleep(1000);
    const got = readFileSync(join(full.dir, "typed.bin")).subarray(before).toString("utf8");
    const exact = got === MIXED.repeat(typed);
    rows.push({
      ...row,
      note: `${[...MIXED].length} chars; ${exact ? "exact" : "NOT EXACT"} (${typed} runs)`,
    });
    encoderRows.push(...(await pngSettings(full.display.display)));
    await activate(url, "bench entry");
    serverRows.push(...(await serverTimes(full.display.display, setup)));
  } finally {
    await full.stop();
  }

  const small = await startScene(1280, 800);
  try {
    const url = small.server.url;
    rows.push(
      await commandRow(
        url,
        "screenshot PNG on a 1280x800 screen",
        "screenshot",
        {},
        {
          setup: await screenChanger(url),
          target: "≤ 25 ms",
          note: await kib(url, {}),
        },
      ),
    );
  } finally {
    await small.stop();
  }

  printTable("Linux desktop through POST /cmd (Xvfb + openbox, 2 cores)", rows);
  printTable("Server time of a changed 1920x1080 screen (capture + encode + base64, in process)", serverRows);
  printTable("PNG encoder settings, one 1920x1080 capture of the same scene (encoding only)", encoderRows);
  closeClient();
}

await main();
