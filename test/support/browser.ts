/** Debian's Chromium, driven by playwright-core (no browser download): the browser of the page tests. */
import { type Browser, chromium } from "playwright-core";
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
