/** Debian's Chromium, driven by playwright-core (no browser download): the browser of the page tests. */
import { type Browser, chromium, type Page } from "playwright-core";
import { findProgram } from "../../src/os/launch.js";

/** The system browser: `$HANGAR_TEST_BROWSER`, else Chromium or Chrome on PATH. */
export function systemChromium(): string {
  const found =
    process.env.HANGAR_TEST_BROWSER ??
    ["chromium", "chromium-browser", "google-chrome"].map((name) => findProgram(name)).find(Boolean);
  if (!found)
    throw new Error("no Chromium on PATH: run ./scripts/install-deps.sh (it installs Debian's chromium)");
  return found;
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: systemChromium(), args: ["--no-sandbox"] });
}

/**
 * Collects into `problems` what a page reports going wrong: its console's errors and its uncaught
 * exceptions. Left out is Chromium's own line for a request it cut because the machine's network
 * changed (`net::ERR_NETWORK_CHANGED`): the suite's container tests add and remove interfaces beside
 * the browser all along, the pages poll again, and what they show then is what the tests assert.
 */
export function collectProblems(page: Page, problems: string[]): void {
  page.on("console", (message) => {
    if (message.type() === "error" && !message.text().includes("net::ERR_NETWORK_CHANGED"))
      problems.push(message.text());
  });
  page.on("pageerror", (err) => problems.push(err.message));
}
