/**
 * The browser agents drive by DOM commands (`browser_*`, cua's `/playwright_exec`): the system's
 * Chromium through playwright-core, started on first use with a window on Hangar's own display, in a
 * persistent profile of this server's own (see `browserProfileDir`). So the page an agent visits by URL is the one it sees in its screenshots and
 * in the accessibility tree (Chromium runs with its renderer accessibility on).
 *
 * Tabs: each open page is a tab with an id (`tab_1`, `tab_2`, … in the order they opened). The
 * newest is the current one (a link that opens a tab is followed there) until another is made
 * current (`activate`); when the current one closes, the one current before it is again. The
 * current tab is also the one in front on the desktop. What happened meanwhile (tabs that opened,
 * dialogs that were dismissed) is kept for `drainChanges`, and each tab keeps its last console
 * messages and requests (`PageLog`).
 */
import { homedir } from "node:os";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { CommandError } from "../common/errors.js";
import { type Logger, silentLogger } from "../common/logger.js";
import { findProgram } from "../os/launch.js";
import { PageLog } from "./page-log.js";

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

/** An open page, by the id the `browser_*` commands know it by. */
export interface Tab {
  readonly id: string;
  readonly page: Page;
  readonly log: PageLog;
}

/** Something that happened in the browser between two commands that asked (`drainChanges`). */
export type BrowserChange =
  | { type: "tab_opened"; tab_id: string }
  | { type: "dialog_dismissed"; kind: string; message: string };

/** The most changes kept between two `drainChanges` (a page can open dialogs in a loop). */
const MAX_CHANGES = 100;

export class BrowserSession {
  private context: Promise<BrowserContext> | undefined;
  /** Open tabs, the current one last. */
  private readonly tabs: Tab[] = [];
  private nextTab = 1;
  private changes: BrowserChange[] = [];
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

  /**
   * The page of a tab: the current one when `tabId` is not given (starting the browser, or a page,
   * when there is none), else that tab's (`not_found` when no open tab has that id).
   */
  async page(tabId?: string | null): Promise<Page> {
    return (await this.tab(tabId)).page;
  }

  /** A tab: the current one when `tabId` is not given, as `page()`. */
  async tab(tabId?: string | null): Promise<Tab> {
    const context = await this.start();
    if (tabId) return this.openTab(tabId);
    const current = this.current();
    if (current) return current;
    return this.recordOf(await context.newPage());
  }

  /** The open tabs in the order they opened, and which is current. */
  async openTabs(): Promise<{ tab: Tab; current: boolean }[]> {
    await this.start();
    const current = this.current();
    return this.live()
      .map((tab) => ({ tab, current: tab === current }))
      .sort((a, b) => tabNumber(a.tab.id) - tabNumber(b.tab.id));
  }

  /** Opens a tab, which becomes the current one. */
  async newTab(): Promise<Tab> {
    const context = await this.start();
    const tab = this.recordOf(await context.newPage());
    await this.activate(tab.id);
    return tab;
  }

  /** Makes a tab the current one and brings it to the front of the browser's window. */
  async activate(tabId: string): Promise<Tab> {
    await this.start();
    const tab = this.openTab(tabId);
    this.tabs.splice(this.tabs.indexOf(tab), 1);
    this.tabs.push(tab);
    await tab.page.bringToFront();
    return tab;
  }

  /** Closes a tab; the tab current before it is current again (and in front). */
  async closeTab(tabId: string): Promise<void> {
    await this.start();
    const tab = this.openTab(tabId);
    const wasCurrent = tab === this.current();
    await tab.page.close();
    this.forget(tab);
    const next = this.current();
    if (wasCurrent && next) await next.page.bringToFront();
  }

  /** What happened since the last call (tabs opened, dialogs dismissed), oldest first. */
  drainChanges(): BrowserChange[] {
    const changes = this.changes;
    this.changes = [];
    return changes;
  }

  async close(): Promise<void> {
    const context = this.context;
    this.context = undefined;
    await context?.then((c) => c.close()).catch(() => undefined);
  }

  private live(): Tab[] {
    return this.tabs.filter((tab) => !tab.page.isClosed());
  }

  private current(): Tab | undefined {
    return this.live().at(-1);
  }

  private openTab(tabId: string): Tab {
    const tab = this.live().find((t) => t.id === tabId);
    if (!tab) {
      const open = this.live().map((t) => t.id);
      throw new CommandError(
        "not_found",
        `No open tab ${JSON.stringify(tabId.slice(0, 40))} (open: ${open.join(", ") || "none"})`,
      );
    }
    return tab;
  }

  /** The tab of a page, tracked from its first sight: its id, its log, its dialogs dismissed. */
  private recordOf(page: Page): Tab {
    const known = this.tabs.find((tab) => tab.page === page);
    if (known) return known;
    const tab: Tab = { id: `tab_${this.nextTab++}`, page, log: new PageLog(page) };
    this.tabs.push(tab);
    page.once("close", () => this.forget(tab));
    // A dialog would block the page until answered: dismissed (as Playwright does when nobody
    // listens), and told.
    page.on("dialog", (dialog) => {
      this.note({ type: "dialog_dismissed", kind: dialog.type(), message: dialog.message() });
      dialog.dismiss().catch(() => undefined);
    });
    return tab;
  }

  private forget(tab: Tab): void {
    const index = this.tabs.indexOf(tab);
    if (index >= 0) this.tabs.splice(index, 1);
  }

  private note(change: BrowserChange): void {
    if (this.changes.length < MAX_CHANGES) this.changes.push(change);
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
    for (const page of context.pages()) this.recordOf(page);
    context.on("page", (page) => {
      const tab = this.recordOf(page);
      this.note({ type: "tab_opened", tab_id: tab.id });
    });
    context.once("close", () => {
      this.tabs.length = 0;
      this.changes = [];
      if (this.context) this.context = undefined;
      this.log.info("browser closed");
    });
    this.log.info({ executablePath, profile }, "browser started");
    return context;
  }
}

/** `tab_12` → 12. */
function tabNumber(id: string): number {
  return Number(id.slice(4));
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
