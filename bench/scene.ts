/**
 * The desktop scene the desktop benchmarks measure (a gradient wallpaper, text-filled xterms, a GTK
 * entry and a key recorder), the `/cmd` client they use, and the helpers that change the screen.
 * bench/desktop.ts draws it on a private Xvfb; bench/compare.ts on any display.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import sharp from "sharp";
import { APPS, PYTHON, startDesktopServer } from "../test/support/desktop.js";
import { post } from "./client.js";
import { type Row, sample, summarize } from "./lib.js";

/** 100 characters: letters, digits, ASCII symbols, accents, CJK and emoji. */
export const MIXED =
  'Hello, World 123 ~!@#$%^&*()_+{}|:"<>? café naïve Grüße ñ 日本語テキスト 中文 😀🎉✓ — fin. abcdefghijklmnopqrst';

export async function timeWithSetup(
  name: string,
  runs: number,
  setup: () => Promise<unknown>,
  fn: () => Promise<unknown>,
  options: { target?: string; note?: string } = {},
): Promise<Row> {
  return { name, ...summarize(await sample(runs, fn, { setup })), ...options };
}

/**
 * Draws the scene on `display` with programs started by `start`; `dir` receives the wallpaper and
 * the files the entry and the key recorder write (`entry.txt`, `typed.bin`).
 */
export async function drawScene(
  start: (file: string, args: string[]) => unknown,
  dir: string,
  width: number,
  height: number,
) {
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
}

/** A private desktop (Xvfb + openbox + an in-process Hangar) showing the scene. */
export async function startScene(width: number, height: number) {
  const desk = await startDesktopServer({ width, height });
  await drawScene((file, args) => desk.spawn(file, args), desk.dir, width, height);
  return { display: desk.display, dir: desk.dir, server: desk.server, stop: () => desk.stop() };
}

/** The scene on an existing display (e.g. one another server also drives); `stop()` ends its programs. */
export async function sceneOn(display: string, width: number, height: number) {
  const dir = mkdtempSync(join(tmpdir(), "hangar-bench-scene-"));
  const children: ChildProcess[] = [];
  const start = (file: string, args: string[]) => {
    const child = spawn(file, args, { env: { ...process.env, DISPLAY: display }, stdio: "ignore" });
    child.on("error", () => undefined);
    children.push(child);
    return child;
  };
  await drawScene(start, dir, width, height);
  return {
    dir,
    stop: () => {
      for (const child of children) child.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export async function activate(url: string, title: string) {
  const { windows } = await post(url, "get_application_windows", { app: title });
  await post(url, "activate_window", { window_id: windows[0] });
  await sleep(200);
}

/** Focuses the GTK entry and returns a function that types one more character into it. */
export async function screenChanger(url: string) {
  await activate(url, "bench entry");
  let tick = 0;
  return async () => {
    await post(url, "type_text", { text: String(tick++ % 10) });
    await sleep(20);
  };
}

/**
 * The other scene: a whole new screen before each call (a page loaded, a window switched). A
 * full-screen window of text lines on a flat colour (bench/apps/live-screen.py repaint) covers the
 * desktop; `change()` has it draw its background and text anew and resolves once the X server has
 * the frame. `stop()` closes it, uncovering the desktop scene.
 */
export async function wholeScreenChanger(display: string) {
  const child = spawn(PYTHON, [join(import.meta.dirname, "apps/live-screen.py"), "repaint"], {
    env: { ...process.env, DISPLAY: display },
    stdio: ["pipe", "pipe", "ignore"],
  });
  child.on("error", () => undefined);
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  let waiting: (() => void) | null = null;
  lines.on("line", (line) => {
    if (line === "drawn") waiting?.();
  });
  const change = async () => {
    const drawn = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the repaint window did not draw in 10 s")), 10_000);
      waiting = () => {
        clearTimeout(timer);
        waiting = null;
        resolve();
      };
    });
    child.stdin?.write("\n");
    await drawn;
  };
  // Mapped, full screen, and drawn once more after that.
  await change();
  await sleep(300);
  await change();
  return {
    change,
    stop: () => {
      lines.close();
      child.kill();
    },
  };
}
