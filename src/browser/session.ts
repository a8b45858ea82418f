/**
 * The browser agents drive by DOM commands (`browser_*`, cua's `/playwright_exec`): the system's
 * Chromium through playwright-core, started on first use with a window on Hangar's own display, in a
 * persistent profile of this server's own (see `browserProfileDir`). So the page an agent visits by URL is the one it sees in its screenshots and
 * in the accessibility tree (Chromium runs with its renderer accessibility on).
 *
 * Tabs: the newest open page is the current one (a link that opens a tab is followed there); when
 * it closes, the one opened before it is current again.
 */
import { homedir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { CommandError } from "../common/errors.js";
import { type Logger, silentLogger } from "../common/logger.js";
import { findProgram } from "../os/launch.js";

export interface BrowserOptions {
  /** The browser executable (`--browser-path`, `HANGAR_BROWSER`); default: Chromium on PATH. */
  executablePath?: string;
  /** The desktop's variables when the browser starts (its `DISPLAY`, the session bus). */
  env: () => Readonly<Record<string, string | undefined>>;
  /**
   * Where the persistent profile lives, or a function that says so when the browser starts (the
   * server's default, `browserProfileDir(port)`: one profile per server, as Chromium locks a profile
   * to one running browser).
   */
  profileDir?: string | (() => string);
  /** Allow `browser_evaluate` (JavaScript chosen by the agent, run in the page). */
  allowEvaluate?: boolean;
  /** The web search of `browser_web_search`; `%s` is replaced by the query. */
  searchUrl?: string;
  log?: Logger;
}

const BROWSER_NAMES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];
const DEFAULT_SEARCH = "https://duckduckgo.com/?q=%s";

export class BrowserSession {
  private context: Promise<BrowserContext> | undefined;
  private readonly pages: Page[] = [];
  private readonly log: Logger;

  constructor(private readonly options: BrowserOptions) {
    this.log = options.log ?? silentLogger;
  }

  get allowEvaluate(): boolean {
    return this.options.allowEvaluate ?? false;
  }

  /** Whether the browser is started (its page can be read without starting it). */
  get running(): boolean {
    return this.context !== undefined;
  }

  searchUrl(query: string): string {
    return (this.options.searchUrl ?? DEFAULT_SEARCH).replace("%s", encodeURIComponent(query));
  }

  /** The current page, starting the browser (or a page) when there is none. */
  async page(): Promise<Page> {
    const context = await this.start();
    const open = this.pages.filter((p) => !p.isClosed());
    if (open.length > 0) return open[open.length - 1];
    return context.newPage();
  }

  async close(): Promise<void> {
    const context = this.context;
    this.context = undefined;
    await context?.then((c) => c.close()).catch(() => undefined);
  }

  private start(): Promise<BrowserContext> {
    this.context ??= this.launch().catch((err) => {
      this.context = undefined;
      throw err;
    });
    return this.context;
  }

  private async launch(): Promise<BrowserContext> {
    const executablePath =
      this.options.executablePath ?? BROWSER_NAMES.map((n) => findProgram(n)).find(Boolean);
    if (!executablePath || !findProgram(executablePath)) {
      throw new CommandError(
        "unavailable",
        executablePath
          ? `No browser at ${executablePath} (HANGAR_BROWSER / --browser-path)`
          : "No browser installed: install chromium or set HANGAR_BROWSER",
      );
    }
    const env = this.options.env();
    if (!env.DISPLAY) {
      throw new CommandError(
        "unavailable",
        "The browser needs a display: this server has none (DISPLAY is unset)",
      );
    }
    const { chromium } = await import("playwright-core");
    const given = this.options.profileDir;
    const profile = (typeof given === "function" ? given() : given) ?? browserProfileDir();
    const args = [
      "--no-first-run",
      "--no-default-browser-check",
      "--force-renderer-accessibility",
      "--disable-dev-shm-usage",
    ];
    // Chromium will not start as root with its sandbox on (a container's root, a CI machine).
    if (process.getuid?.() === 0) args.push("--no-sandbox");
    const context = await chromium
      .launchPersistentContext(profile, {
        executablePath,
        headless: false,
        viewport: null,
        args,
        env: Object.fromEntries(
          Object.entries({ ...process.env, ...env }).filter((e): e is [string, string] => e[1] !== undefined),
        ),
        timeout: 30_000,
      })
      .catch((err: Error) => {
        throw new CommandError(
          "unavailable",
          `The browser did not start (${executablePath}): ${firstLine(err.message)}`,
        );
      });
    const track = (page: Page) => {
      this.pages.push(page);
      page.once("close", () => this.pages.splice(this.pages.indexOf(page), 1));
    };
    for (const page of context.pages()) track(page);
    context.on("page", track);
    context.once("close", () => {
      this.pages.length = 0;
      if (this.context) this.context = undefined;
      this.log.info("browser closed");
    });
    this.log.info({ executablePath, profile }, "browser started");
    return context;
  }
}

/**
 * The profile of the server listening on `port`: `$XDG_STATE_HOME/hangar/browser/port-<port>`
 * (`~/.local/state/…`). Two servers of one user listen on two ports, so each starts its own browser;
 * a server started again on its port finds its cookies and logins again.
 */
export function browserProfileDir(port?: number): string {
  const state = process.env.XDG_STATE_HOME || join(homedir(), ".local", "state");
  return join(state, "hangar", "browser", port === undefined ? "default" : `port-${port}`);
}

function firstLine(text: string): string {
  return (
    text
      .split("\n")
      .find((line) => line.trim() !== "")
      ?.trim() ?? text
  );
}

/** Hands out the browser session; `close()` stops the browser when the server stops. */
export type BrowserProvider = () => Promise<BrowserSession>;

export const noBrowser: BrowserProvider = async () => {
  throw new CommandError("unavailable", "No browser is configured for this server");
};
