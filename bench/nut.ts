/**
 * The nut-js backend measured through the real server (HTTP POST /cmd) on a private Xvfb at
 * 1920x1080: screenshots, click, move and typing 100 mixed characters into an xterm (checked
 * exact). Run: node --import tsx bench/nut.ts
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { backendOptions } from "../src/desktop/choose-backend.js";
import { DesktopManager } from "../src/desktop/manager.js";
import { startVirtualDisplay } from "../src/desktop/virtual-display.js";
import { startTestServer } from "../test/support/server.js";
import { printTable, type Row, summarize, timeIt } from "./lib.js";

/** 100 characters: ASCII letters and symbols, accents, CJK and emoji. */
const MIXED = [
  ..."Hi! a+b=c; {x|y} <tag> ~`@#$%^&*() héllo wörld ñ ç ß — «» ✓ 日本語のテキスト 中文 한국어 😀🎉🚀 café naïve",
]
  .concat([..."0123456789abcdefghijklmnopq"])
  .slice(0, 100)
  .join("");

async function main() {
  const display = await startVirtualDisplay({ width: 1920, height: 1080 });
  const manager = new DesktopManager({ display: display.display, ...backendOptions("nut") });
  const server = await startTestServer({ desktop: manager.provider });
  const dir = mkdtempSync(join(tmpdir(), "hangar-nut-bench-"));
  const out = join(dir, "typed.txt");
  const xterm = spawn(
    "xterm",
    [
      "-u8",
      "-geometry",
      "100x20+0+0",
      "-title",
      "benchcat",
      "-e",
      "sh",
      "-c",
      `stty -icanon; exec cat > '${out}'`,
    ],
    {
      env: { ...process.env, ...display.env },
      stdio: "ignore",
    },
  );
  // Terminals full of text, so that the screenshots are not of an empty (trivially small) screen.
  const busy = ["110x45+20+20", "100x40+900+80", "90x25+300+620"].map((geometry) =>
    spawn(
      "xterm",
      ["-geometry", geometry, "-e", "sh", "-c", "ls -la /usr/lib /usr/bin | head -400; exec sleep 1000"],
      {
        env: { ...process.env, ...display.env },
        stdio: "ignore",
      },
    ),
  );
  const cmd = async (command: string, params: unknown = {}) => {
    const { event } = await server.cmd(command, params);
    if (!event?.success) throw new Error(`${command} failed: ${JSON.stringify(event)}`);
    return event;
  };
  try {
    await cmd("get_screen_size");
    await sleep(1500); // the xterms map
    const { windows } = await cmd("get_application_windows", { app: "benchcat" });
    await cmd("activate_window", { window_id: windows[0] });
    // Everything typed goes into the `cat` of the benchcat xterm; it must arrive exactly.
    let typed = "";
    const type = async (text: string) => {
      await cmd("type_text", { text });
      typed += text;
    };
    /** A screenshot after a character typed into the xterm (untimed) changed the screen. */
    const changedScreen = async (name: string, params: unknown, target: string): Promise<Row> => {
      const samples: number[] = [];
      for (let i = 0; i < 23; i++) {
        await type("x");
        await sleep(30);
        const start = performance.now();
        await cmd("screenshot", params);
        if (i >= 3) samples.push(performance.now() - start);
      }
      return { name, ...summarize(samples), target };
    };

    const rows: Row[] = [];
    rows.push(await changedScreen("screenshot png 1920x1080", {}, "≤ 40 ms"));
    rows.push(
      await changedScreen("screenshot jpeg q80 1920x1080", { format: "jpeg", quality: 80 }, "≤ 25 ms"),
    );
    const region = { region: { x: 0, y: 0, width: 1280, height: 800 } };
    rows.push(await changedScreen("screenshot png, region 1280x800", region, "≤ 25 ms (1280x800 screen)"));
    rows.push(
      await timeIt("screenshot png 1920x1080, unchanged screen", () => cmd("screenshot"), {
        runs: 30,
        target: "≤ 5 ms",
      }),
    );
    rows.push(
      await timeIt("left_click at x,y", () => cmd("left_click", { x: 1800, y: 60 }), {
        runs: 100,
        target: "≤ 3 ms",
      }),
    );
    let i = 0;
    rows.push(
      await timeIt("move_cursor", () => cmd("move_cursor", { x: 100 + (i++ % 500), y: 200 }), {
        runs: 200,
        target: "≤ 2 ms",
      }),
    );
    await cmd("activate_window", { window_id: windows[0] });
    const typing = await timeIt("type_text 100 mixed chars", () => type(`${MIXED}\n`), {
      runs: 20,
      warmup: 2,
      target: "≤ 150 ms",
    });
    await sleep(500);
    const exact = readFileSync(out, "utf8") === typed;
    rows.push({ ...typing, note: exact ? "exact" : "NOT EXACT" });
    printTable("nut-js backend through /cmd (Xvfb 1920x1080, 2 cores)", rows);
  } finally {
    for (const child of [xterm, ...busy]) child.kill("SIGKILL");
    await server.close();
    await manager.close();
    await display.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
