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
 *
 * With a command user (`--command-user`, src/os/command-user.ts), Chromium runs as that user, as
 * every other process the agent starts does: a browser of the server's own (root) would let the
 * agent read any file by `file://` and write as root through the profile. Playwright starts the
 * executable it is given with its own arguments and talks to it over a pipe (descriptors 3 and 4),
 * so it is given a wrapper script that execs `setpriv … chromium "$@"`: the pid, the pipe and the
 * process group stay Playwright's to close and kill.
 */
import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { chown } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { isAbsolute, join, relative, sep } from "node:path";
import { promisify } from "node:util";
import type { BrowserContext, Page } from "playwright-core";
import { CommandError } from "../common/errors.js";
import { type Logger, silentLogger } from "../common/logger.js";
import { asUser, type CommandUser, userCwd, userEnv } from "../os/command-user.js";
import { findProgram } from "../os/launch.js";
import { makeOwnedTempDir } from "../os/owned-temp-dir.js";
import { PageLog } from "./page-log.js";

export interface BrowserOptions {
  /** The browser executable (`--browser-path`, `HANGAR_BROWSER`); default: Chromium on PATH. */
  executablePath?: string;
  /** The desktop's variables when the browser starts (its `DISPLAY`, the session bus). */
  env: () => Readonly<Record<string, string | undefined>>;
  /**
   * Where the persistent profile lives, or a function that says so when the browser starts (the
   * server's default, `browserProfileDir(port, user)`: one profile per server, as Chromium locks a
   * profile to one running browser).
   */
  profileDir?: string | (() => string);
  /**
   * The account Chromium runs as (`--command-user`) instead of the server's. Its profile is made by
   * that user; one in a home the user cannot make it in (`nobody`'s `/nonexistent`) is replaced by a
   * temporary one, removed when the browser closes.
   */
  user?: CommandUser;
  /** Allow `browser_evaluate` (JavaScript chosen by the agent, run in the page). */
  allowEvaluate?: boolean;
  /** The web search of `browser_web_search`; `%s` is replaced by the query. */
  searchUrl?: string;
  log?: Logger;
}

const BROWSER_NAMES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];
const DEFAULT_SEARCH = "https://duckduckgo.com/?q=%s";
/** What a launch for a command user makes in the temp dir: `<prefix><purpose>-<server pid>-<random>`. */
const SCRATCH_PREFIX = "hangar-browser-";
/** How long making or removing a directory as the command user may take (ms). */
const AS_USER_TIMEOUT_MS = 30_000;

const execFileAsync = promisify(execFile);

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
  /** What launches made for the command user and is not removed yet (`Scratch`). */
  private readonly scratches = new Set<Scratch>();
  /** The removal started when the last browser closed. */
  private removing: Promise<void> = Promise.resolve();

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
    // The context's close event has started it: the server does not exit before it is done. What it
    // could not remove is tried again (the agent may kill the user's `rm` as any process of the user's).
    await this.removing;
    await Promise.all([...this.scratches].map((scratch) => this.removeScratch(scratch)));
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

  private async removeScratch(scratch: Scratch): Promise<void> {
    await scratch.remove();
    if (scratch.empty) this.scratches.delete(scratch);
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
    const { user } = this.options;
    const given = this.options.profileDir;
    let profile = (typeof given === "function" ? given() : given) ?? browserProfileDir(undefined, user);
    const args = [
      "--no-first-run",
      "--no-default-browser-check",
      "--force-renderer-accessibility",
      "--disable-dev-shm-usage",
    ];
    // Chromium will not start as root with its sandbox on (a container's root, a CI machine). The
    // command user's browser of a root server is started as before: without it (Playwright leaves the
    // sandbox off too unless asked, `chromiumSandbox`); what guards the server is the other uid.
    if (process.getuid?.() === 0) args.push("--no-sandbox");
    const scratch = new Scratch(this.log);
    this.scratches.add(scratch);
    let context: BrowserContext;
    try {
      let program = executablePath;
      if (user) {
        program = await scratch.wrapper(user, executablePath);
        profile = await scratch.userProfile(user, profile);
      }
      const merged = { ...process.env, ...env };
      context = await chromium
        .launchPersistentContext(profile, {
          executablePath: program,
          headless: false,
          viewport: null,
          args,
          env: Object.fromEntries(
            Object.entries(user ? userEnv(user, merged) : merged).filter(
              (e): e is [string, string] => e[1] !== undefined,
            ),
          ),
          timeout: 30_000,
        })
        .catch((err: Error) => {
          throw new CommandError(
            "unavailable",
            `The browser did not start (${executablePath}${user ? ` as ${user.name}` : ""}): ${firstLine(err.message)}`,
          );
        });
    } catch (err) {
      await this.removeScratch(scratch);
      throw err;
    }
    for (const page of context.pages()) this.recordOf(page);
    context.on("page", (page) => {
      const tab = this.recordOf(page);
      this.note({ type: "tab_opened", tab_id: tab.id });
    });
    context.once("close", () => {
      this.tabs.length = 0;
      this.changes = [];
      if (this.context) this.context = undefined;
      this.removing = this.removeScratch(scratch);
      this.log.info("browser closed");
    });
    this.log.info({ executablePath, profile, user: user?.name }, "browser started");
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
 * a server started again on its port finds its cookies and logins again. With a command user, the
 * same place in that user's home (the server's `XDG_STATE_HOME` is the server's, not the user's).
 */
export function browserProfileDir(port?: number, user?: CommandUser): string {
  const state = user
    ? join(user.home, ".local", "state")
    : process.env.XDG_STATE_HOME || join(homedir(), ".local", "state");
  return join(state, "hangar", "browser", port === undefined ? "default" : `port-${port}`);
}

/**
 * What one launch makes for a browser run as the command user, removed when that browser closes,
 * when it fails to start, and at the latest when the server exits: the directory of the wrapper
 * script (the server's, mode 0700, so that the user cannot change what the server runs), and a
 * temporary profile (the user's) when the user's home cannot hold one.
 */
class Scratch {
  private readonly dirs: { dir: string; user?: CommandUser }[] = [];
  private readonly onExit = () => this.removeNow();
  private removal: Promise<void> | undefined;

  constructor(private readonly log: Logger) {}

  /**
   * The wrapper Playwright starts instead of `executablePath`: a script that execs `setpriv` (which
   * execs Chromium as the user), with Playwright's arguments. It starts in the user's working
   * directory (the server's may be one the user cannot enter). Its directory is an owned temporary
   * one (os/owned-temp-dir.ts): what a server killed with -9 left is removed at the next launch.
   */
  async wrapper(user: CommandUser, executablePath: string): Promise<string> {
    const dir = this.add(await makeOwnedTempDir(`${SCRATCH_PREFIX}wrapper-`));
    const [file, args] = asUser(user, executablePath, []);
    const cwd = userCwd(user, undefined) ?? "/";
    const script = join(dir, "browser");
    writeFileSync(
      script,
      `#!/bin/sh\ncd ${shQuote(cwd)} 2>/dev/null || cd /\nexec ${[file, ...args].map(shQuote).join(" ")} "$@"\n`,
      { mode: 0o700 },
    );
    return script;
  }

  /**
   * `profile`, made by the user (so that every level it creates is the user's, and a path the user
   * may not write is refused as it would be to them); when it lies in a home the user cannot make it
   * in, a temporary directory of the user's instead.
   */
  async userProfile(user: CommandUser, profile: string): Promise<string> {
    const failed = await runAsUser(user, "/bin/sh", [
      "-c",
      'mkdir -p -m 0700 -- "$1" && test -d "$1" -a -w "$1" -a -x "$1"',
      "sh",
      profile,
    ]).then(
      () => undefined,
      (err: Error) => firstLine(err.message),
    );
    if (failed === undefined) return profile;
    if (!isInside(profile, user.home)) {
      throw new CommandError(
        "unavailable",
        `The browser's profile ${profile} cannot be made or written by ${user.name} (--command-user): ${failed}`,
      );
    }
    // mkdtemp makes it the server's, mode 0700, where no one else can replace it before it is the user's.
    const dir = mkdtempSync(join(tmpdir(), `${SCRATCH_PREFIX}profile-${process.pid}-`));
    try {
      await chown(dir, user.uid, user.gid);
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
    this.add(dir, user);
    this.log.warn(
      { home: user.home, profile: dir },
      `${user.name}'s home cannot hold the browser's profile: it is temporary`,
    );
    return dir;
  }

  /** Whether everything it made is removed. */
  get empty(): boolean {
    return this.dirs.length === 0;
  }

  /**
   * Removes the directories; what could not be removed is kept for another call (and the server's
   * exit). What is in the user's is removed by the user: a tree the user can change while it is
   * removed is not the server's to walk (a directory swapped for a link). The server removes the
   * emptied directory itself, which the user cannot in a temp dir that is not sticky.
   */
  remove(): Promise<void> {
    this.removal ??= this.removeAll().finally(() => {
      this.removal = undefined;
    });
    return this.removal;
  }

  private async removeAll(): Promise<void> {
    const removeOne = async ({ dir, user }: { dir: string; user?: CommandUser }): Promise<boolean> => {
      try {
        if (user) {
          await runAsUser(user, "rm", ["-rf", "--", dir]).catch(() => undefined);
          rmdirIfThere(dir);
        } else {
          rmSync(dir, { recursive: true, force: true });
        }
        return true;
      } catch (err) {
        this.log.warn(
          { dir, err: firstLine((err as Error).message) },
          "browser scratch directory not removed (tried again when the server stops)",
        );
        return false;
      }
    };
    const dirs = [...this.dirs];
    const removed = await Promise.all(dirs.map(removeOne));
    for (const [i, entry] of dirs.entries()) {
      if (removed[i]) this.dirs.splice(this.dirs.indexOf(entry), 1);
    }
    if (this.dirs.length === 0) process.off("exit", this.onExit);
  }

  private add(dir: string, user?: CommandUser): string {
    if (this.dirs.length === 0) process.once("exit", this.onExit);
    this.dirs.push({ dir, user });
    return dir;
  }

  /** `remove()` as the server exits, when nothing asynchronous runs any more. */
  private removeNow(): void {
    for (const { dir, user } of this.dirs.splice(0)) {
      try {
        if (user) {
          try {
            execFileSync(...asUser(user, "rm", ["-rf", "--", dir]), { stdio: "ignore", cwd: "/" });
          } finally {
            rmdirIfThere(dir);
          }
        } else {
          rmSync(dir, { recursive: true, force: true });
        }
      } catch {
        // Left in the temp dir: the server is exiting, with no one to tell.
      }
    }
  }
}

/** Runs `file args` as the user, in /, with the user's environment; rejects with what it said. */
async function runAsUser(user: CommandUser, file: string, args: string[]): Promise<void> {
  const [command, commandArgs] = asUser(user, file, args);
  try {
    await execFileAsync(command, commandArgs, {
      cwd: "/",
      env: userEnv(user, process.env),
      timeout: AS_USER_TIMEOUT_MS,
    });
  } catch (err) {
    const said = String((err as { stderr?: unknown }).stderr ?? "").trim();
    throw new Error(said || (err as Error).message);
  }
}

/** Removes an empty directory (never what is in it), unless it is gone already. */
function rmdirIfThere(dir: string): void {
  try {
    rmdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

/** `text` as one shell word. */
function shQuote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/** Whether `path` is `dir` or below it. */
function isInside(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  return rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel);
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
