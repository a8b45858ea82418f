import { readFileSync } from "node:fs";
import http from "node:http";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import sharp, { type PngOptions } from "sharp";
import { PNG_OPTIONS } from "../src/desktop/screenshot.js";
import { X11Backend } from "../src/desktop/x11/backend.js";
import { APPS, PYTHON, startDesktopServer } from "../test/support/desktop.js";
import { printTable, type Row, summarize, timeIt } from "./lib.js";

const RUNS = 30;

/** 100 characters: letters, digits, ASCII symbols, accents, CJK and emoji. */
const MIXED =
  'Hello, World 123 ~!@#$%^&*()_+{}|:"<>? café naïve Grüße ñ 日本語テキスト 中文 😀🎉✓ — fin. abcdefghijklmnopqrst';

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/**
 * POSTs `/cmd` with Node's own HTTP client (keep-alive) and returns the parsed event. The time a
 * benchmark measures ends when the whole reply has arrived; parsing the JSON is the client's cost
 * and is left out (`timed` resolves before it).
 */
function request(url: string, command: string, params: unknown = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}/cmd`,
      { method: "POST", agent, headers: { "content-type": "application/json" } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify({ command, params }));
  });
}

function parse(command: string, text: string) {
  const event = JSON.parse(text.slice(text.indexOf("data: ") + 6));
  if (!event.success) throw new Error(`${command}: ${event.error}`);
  return event;
}

async function post(url: string, command: string, params: unknown = {}) {
  return parse(command, await request(url, command, params));
}

/** A timed call whose reply is checked after the clock has stopped. */
function timedPost(url: string, command: string, params: unknown = {}) {
  const replies: string[] = [];
  return {
    run: async () => {
      replies.push(await request(url, command, params));
    },
    check: () => {
      for (const reply of replies.splice(0)) parse(command, reply);
    },
  };
}

/** Times `fn` with an untimed `setup` before each run (e.g. to change the screen). */
async function timeWithSetup(
  name: string,
  setup: () => Promise<unknown>,
  fn: () => Promise<unknown>,
  options: { target?: string; note?: string } = {},
): Promise<Row> {
  const samples: number[] = [];
  for (let i = 0; i < RUNS + 3; i++) {
    await setup();
    const start = performance.now();
    await fn();
    if (i >= 3) samples.push(performance.now() - start);
  }
  return { name, ...summarize(samples), ...options };
}

/** A private desktop with a busy scene (wallpaper, text-filled xterms, an entry, a key recorder). */
async function startScene(width: number, height: number) {
  const desk = await startDesktopServer({ width, height });
  const { dir } = desk;
  const start = (file: string, args: string[]) => desk.spawn(file, args);
  const wallpaper = join(dir, "wallpaper.png");
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">
    <defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1">
      <stop offset="0" stop-color="#1d3557"/><stop offset="0.6" stop-color="#457b9d"/><stop offset="1" stop-color="#e9c46a"/>
    </linearGradient></defs>
    <rect width="100%" height="100%" fill="url(#g)"/>
    <circle cx="${width * 0.8}" cy="${height * 0.25}" r="${height * 0.18}" fill="#f4a261" opacity="0.8"/>
    <text x="${width * 0.55}" y="${height * 0.9}" font-size="64" fill="#ffffff" font-family="sans-serif">Hangar</text>
  </svg>`;
  await sharp(Buffer.from(svg)).png().toFile(wallpaper);
  start(PYTHON, [join(APPS, "wallpaper.py"), wallpaper]);
  await sleep(1000);
  const text = "ls -la /usr/lib /usr/bin | head -400; cat /etc/services | head -200; exec sleep 1000";
  for (const geometry of ["110x45+20+20", "100x40+760+80", "90x25+300+620"]) {
    start("xterm", ["-geometry", geometry, "-e", "sh", "-c", text]);
  }
  start(PYTHON, [join(APPS, "entry.py"), join(dir, "entry.txt"), "bench entry"]);
  start("xterm", [
    "-u8",
    "-title",
    "typing target",
    "-geometry",
    "80x8+1000+700",
    "-e",
    PYTHON,
    join(APPS, "recorder.py"),
    join(dir, "typed.bin"),
  ]);
  await sleep(2500);

  return { display: desk.display, dir, server: desk.server, stop: () => desk.stop() };
}

async function activate(url: string, title: string) {
  const { windows } = await post(url, "get_application_windows", { app: title });
  await post(url, "activate_window", { window_id: windows[0] });
  await sleep(200);
}

/** Focuses the GTK entry and returns a function that types one more character into it. */
async function screenChanger(url: string) {
  await activate(url, "bench entry");
  let tick = 0;
  return async () => {
    await post(url, "type_text", { text: String(tick++ % 10) });
    await sleep(20);
  };
}

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
    ? await timeWithSetup(name, options.setup, call.run, options)
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

const encoderRows: Row[] = [];

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
        target: "≤ 25 ms",
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
  printTable("PNG encoder settings, one 1920x1080 capture of the same scene (encoding only)", encoderRows);
  agent.destroy();
}

await main();
