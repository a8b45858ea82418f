/** Debian's Chromium, driven by playwright-core (no browser download): the browser of the page tests. */
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";
import { type Browser, chromium } from "playwright-core";

const NAMES = ["chromium", "chromium-browser", "google-chrome"];

/** The system browser: `$HANGAR_TEST_BROWSER`, else the first of NAMES on PATH. */
export function systemChromium(): string {
  const given = process.env.HANGAR_TEST_BROWSER;
  if (given) return given;
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    for (const name of NAMES) {
      const path = join(dir, name);
      try {
        accessSync(path, constants.X_OK);
        return path;
      } catch {}
    }
  }
  throw new Error("no Chromium on PATH: run ./scripts/install-deps.sh (it installs Debian's chromium)");
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: systemChromium(), args: ["--no-sandbox"] });
}
