/**
 * `hangar serve --command-user nobody` (src/os/command-user.ts), started as root as a user would:
 * the browser of the `browser_*` commands runs as nobody too (src/browser/session.ts), like every
 * other process the agent starts. A root Chromium would show the agent any file by `file://`; this
 * one opens what nobody may read and no more. Its wrapper script is the server's, its profile
 * (nobody has no home) a temporary one of nobody's, and both are gone when the server stops.
 */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningCli, startCli } from "../support/cli-process.js";
import { eventually } from "../support/desktop.js";
import { descendants, isRunning, processesNamed, uidOf } from "../support/processes.js";
import { postCmd } from "../support/server.js";

const NOBODY = 65534;
const SECRET = "root-only-secret-the-browser-must-not-show";
const PUBLIC = "a page anyone may read";

let serve: RunningCli;
let dir: string;
/** The server's temp dir: nobody must pass through it to the browser's profile. */
let serverTmp: string;
let secretFile: string;
let publicFile: string;
/** The browser's processes seen while it ran: none may outlive the server. */
const browserPids = new Set<number>();

beforeAll(async () => {
  // Short names: Chromium's singleton socket is made in TMPDIR, and a socket's path has 107 bytes at most.
  dir = mkdtempSync(join(tmpdir(), "cu-browser-"));
  serverTmp = join(dir, "t");
  mkdirSync(serverTmp, { mode: 0o1777 });
  chmodSync(serverTmp, 0o1777);
  // nobody may pass through to the files by name, not list them (the suite's temp dir is 0700).
  chmodSync(dir, 0o711);
  chmodSync(tmpdir(), 0o711);
  secretFile = join(dir, "secret.html");
  writeFileSync(secretFile, `<title>Secret</title><p>${SECRET}</p>`, { mode: 0o600 });
  publicFile = join(dir, "public.html");
  writeFileSync(publicFile, `<title>Public</title><p>${PUBLIC}</p>`, { mode: 0o644 });
  chmodSync(publicFile, 0o644);
  serve = await startCli(
    ["serve", "--port", "0", "--command-user", "nobody", "--virtual-display", "800x600"],
    { ...process.env, TMPDIR: serverTmp },
  );
}, 60_000);

afterAll(async () => {
  await serve?.stop();
  // The browser went with the server (any of its processes, by the profile in the server's temp
  // dir on their command lines), and so did what it was started with.
  const alive = () => [
    ...new Set([
      ...[...browserPids].filter(isRunning),
      ...(serverTmp ? processesNamed(serverTmp).filter((p) => p.state !== "Z") : []).map((p) => p.pid),
    ]),
  ];
  const running = await eventually(() => alive().length === 0).then(
    () => [],
    () => alive(),
  );
  // Chromium's scratch directory (`org.chromium.Chromium.*`, its singleton socket's) outlives it with
  // or without a command user, as test/support/leftovers.ts knows.
  const left = serverTmp
    ? readdirSync(serverTmp).filter((name) => !/^org\.chromium\.Chromium\./.test(name))
    : [];
  if (dir) rmSync(dir, { recursive: true, force: true });
  expect(running).toEqual([]);
  expect(left).toEqual([]);
});

async function visit(url: string) {
  const { event } = await postCmd(serve.url, { command: "browser_visit_url", params: { url } });
  return event;
}

/** The current page's text command's whole answer (its text, or why there is none). */
async function pageText(): Promise<string> {
  const { event } = await postCmd(serve.url, { command: "browser_get_page_text", params: {} });
  return JSON.stringify(event);
}

/** The server's descendants that are Chromium (the browser, its zygotes, renderers and helpers). */
function chromiumProcesses(): { pid: number; uid: number; args: string }[] {
  const found = descendants(serve.pid)
    .filter((p) => /chrom/.test(p.args.split(" ")[0] ?? ""))
    .flatMap((p) => {
      try {
        return [{ pid: p.pid, uid: uidOf(p.pid), args: p.args }];
      } catch {
        return [];
      }
    });
  for (const p of found) browserPids.add(p.pid);
  return found;
}

/** The uid and mode of each entry of the server's temp dir that a launch of the browser made. */
function scratch(kind: "wrapper" | "profile"): { uid: number; mode: number }[] {
  return readdirSync(serverTmp)
    .filter((name) => name.startsWith(`hangar-browser-${kind}-`))
    .map((name) => {
      const info = statSync(join(serverTmp, name));
      return { uid: info.uid, mode: info.mode & 0o7777 };
    });
}

// command-user.test.ts, which may run meanwhile, has its agent kill every process of nobody's that
// it can (`pkill -9 -f hangar`): this server's browser too, which is nobody's. The next command starts
// it again, so what a test checks it checks `eventually`, from the command on.
describe("hangar serve --command-user nobody (as root): the browser", () => {
  it("runs Chromium as nobody, from a wrapper of the server's, in a profile of nobody's", async () => {
    const browser = await eventually(async () => {
      const opened = await visit(pathToFileURL(publicFile).href);
      expect(opened, JSON.stringify(opened)).toMatchObject({ success: true, content: { title: "Public" } });
      expect(await pageText()).toContain(PUBLIC);
      const found = chromiumProcesses();
      // The browser itself and at least a renderer.
      expect(found.length).toBeGreaterThanOrEqual(2);
      return found;
    }, 30_000);
    expect(browser.filter((p) => p.uid !== NOBODY)).toEqual([]);
    // The server stays root.
    expect(uidOf(serve.pid)).toBe(0);

    // The wrapper's directory is the server's alone (nobody cannot change what the server runs);
    // nobody's home (/nonexistent) cannot hold the profile, so it is a temporary one of nobody's.
    // (A browser killed meanwhile may have left its own until the server stops.)
    await eventually(() => {
      const wrappers = scratch("wrapper");
      const profiles = scratch("profile");
      expect(wrappers.length).toBeGreaterThan(0);
      expect(wrappers).toEqual(wrappers.map(() => ({ uid: 0, mode: 0o700 })));
      expect(profiles.length).toBeGreaterThan(0);
      expect(profiles).toEqual(profiles.map(() => ({ uid: NOBODY, mode: 0o700 })));
      return true;
    });
  });

  it("cannot open a file only root may read, and opens one nobody may", async () => {
    const denied = await eventually(async () => {
      const event = await visit(pathToFileURL(secretFile).href);
      expect(JSON.stringify(event)).not.toContain(SECRET);
      expect(event.success).toBe(false);
      expect(event.error).toMatch(/ERR_ACCESS_DENIED/);
      return event;
    }, 30_000);
    expect(denied.code).toBe("failed");
    expect(await pageText()).not.toContain(SECRET);
    await eventually(async () => {
      expect(await visit(pathToFileURL(publicFile).href)).toMatchObject({ success: true });
      expect(await pageText()).toContain(PUBLIC);
      return true;
    }, 30_000);
    // Every process of the browser, first to last, was nobody's.
    expect(chromiumProcesses().filter((p) => p.uid !== NOBODY)).toEqual([]);
  });
});
