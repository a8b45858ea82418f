/**
 * A typical agent session in a browser, for the benchmarks that weigh what it costs (bench/recording.ts,
 * bench/live-h264.ts): Chromium maximized on a long article under a note field; the agent clicks the
 * field, types a sentence, scrolls, clicks, with pauses between actions.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { DesktopServer } from "../../test/support/desktop.js";
import { post } from "../client.js";

/** Opens the article in Chromium, maximized on the desktop; resolves once its window is there. */
export async function openArticle(desk: DesktopServer, dir: string, width: number, height: number) {
  const page = join(dir, "article.html");
  writeFileSync(page, articlePage());
  const browser = desk.spawn("chromium", [
    "--no-sandbox",
    "--no-first-run",
    "--disable-gpu",
    `--user-data-dir=${join(dir, "chromium")}`,
    "--start-maximized",
    `--window-size=${width},${height}`,
    "--window-position=0,0",
    `file://${page}`,
  ]);
  await desk.waitForWindow("Agent benchmark article - Chromium", 60_000);
  await sleep(3000);
  return browser;
}

/** The agent's actions for `seconds`: click, type, scroll, click, with pauses. */
export async function agentSession(url: string, seconds: number) {
  const started = performance.now();
  for (let step = 0; performance.now() - started < seconds * 1000; step++) {
    await post(url, "left_click", { x: 400, y: 150 });
    await post(url, "type_text", { text: `Step ${step}: the agent writes a short note about the page. ` });
    await sleep(2000);
    await post(url, "move_cursor", { x: 960, y: 700 });
    await post(url, "scroll", { x: 0, y: step % 4 === 3 ? 8 : -3 });
    await sleep(2000);
    await post(url, "left_click", { x: 900 + (step % 3) * 200, y: 600 });
    await sleep(1500);
  }
}

/** A long article under a fixed note field, as an agent reads and annotates a page. */
export function articlePage(): string {
  const paragraphs = Array.from(
    { length: 80 },
    (_, i) =>
      `<h2>Section ${i + 1}</h2><p>${"Agents read pages like this one, scroll through sections, and write notes about what they find. ".repeat(6)}</p>`,
  ).join("\n");
  return `<!doctype html><title>Agent benchmark article</title>
<style>body{font:18px/1.5 sans-serif;margin:0}header{position:fixed;top:0;left:0;right:0;background:#f4f4f4;padding:12px;border-bottom:1px solid #ccc}
textarea{width:60%;height:80px;font:16px sans-serif}main{margin:140px auto 0;max-width:1100px}</style>
<header><textarea placeholder="Notes"></textarea></header><main>${paragraphs}</main>`;
}
