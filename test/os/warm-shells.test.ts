/**
 * Warm shells (src/os/warm-shells.ts): a waiting shell runs a command as a spawned `/bin/sh -c`
 * does; a timeout or a cancellation kills its whole process group; it follows the server's
 * environment; a killed launcher is replaced; a closed pool leaves nothing behind.
 */
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { runShell, type ShellResult, type ShellRun } from "../../src/os/process.js";
import { WarmShells } from "../../src/os/warm-shells.js";
import { descendants, isRunning } from "../support/processes.js";

/** This process's FIFO directories. */
function fifoDirectories(): string[] {
  return readdirSync(tmpdir()).filter((name) => name.startsWith(`hangar-shells-${process.pid}-`));
}

/** This process's launchers: `/bin/sh -c <launcher> sh <its FIFO directory>`. */
function launchers() {
  return descendants(process.pid).filter(
    (p) => p.ppid === process.pid && p.args.includes(`hangar-shells-${process.pid}-`),
  );
}

/** What a user sees of a run. */
const seen = (r: ShellResult) => ({ stdout: r.stdout, stderr: r.stderr, returnCode: r.returnCode });

let shells: WarmShells;
let dir: string;
beforeAll(() => {
  shells = new WarmShells({ idle: 2, max: 2 });
  // A quote in the name: the directory is quoted for the shell.
  dir = realpathSync(mkdtempSync(join(tmpdir(), "hangar-warm-it's-")));
});
afterAll(() => {
  shells.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs the command in a warm shell, then in a spawned one; both results. */
async function bothWays(run: Omit<ShellRun, "warm">) {
  await shells.warmUp();
  const warm = await runShell({ ...run, warm: shells });
  const spawned = await runShell(run);
  expect(warm.warm).toBe(true);
  expect(spawned.warm).toBe(false);
  return { warm, spawned };
}

describe("a command in a warm shell", () => {
  it.each([
    ["an exit code and both streams", "echo out; echo err >&2; exit 3"],
    ["an EXIT trap", "trap 'echo bye' EXIT; echo hi; exit 4"],
    ["a command that is not found", "nosuchcmd"],
    ["a syntax error", "if true; then"],
    ["stdin at its end", 'cat; read line; echo "[$line] $?"'],
    ["several lines, an error on the third", "echo one\necho two\nnosuchcmd\necho four"],
    ["unicode", "printf '%s\\n' 'héllo ✓ 日本'; echo 'ünï' >&2"],
    ["the shell's name, arguments and flags", 'echo "$0 $# [$-]"'],
    ["the environment", "env | sort"],
    ["a here-document", "cat <<EOF\nline $((1 + 1))\nEOF"],
    ["the shell killed by a signal", "echo before; kill -9 $$"],
    ["a program killed by a signal, then more", "sh -c 'kill -SEGV $$'; echo after $?"],
    ["a program killed by a signal, last", "sh -c 'kill -SEGV $$'"],
    ["more output than a pipe holds", "yes 0123456789 | head -c 300000; echo"],
  ])("gives what a spawned shell gives: %s", async (_, command) => {
    const { warm, spawned } = await bothWays({ command });
    expect(seen(warm)).toEqual(seen(spawned));
  });

  it("runs in the directory asked for, as a spawned shell does, through a symbolic link too", async () => {
    mkdirSync(join(dir, "sub"), { recursive: true });
    symlinkSync(join(dir, "sub"), join(dir, "link"));
    for (const cwd of [dir, join(dir, "link")]) {
      const { warm, spawned } = await bothWays({ command: `pwd; echo "$PWD \${OLDPWD-unset}"; ls`, cwd });
      expect(seen(warm)).toEqual(seen(spawned));
    }
  });

  it("leaves to a spawned shell what it cannot carry: the command's own variables, a very long line", async () => {
    await shells.warmUp();
    const own = await runShell({ command: 'echo "$GREETING"', env: { GREETING: "héllo" }, warm: shells });
    expect(own).toMatchObject({ stdout: "héllo\n", warm: false });
    const long = await runShell({ command: `echo ${"x".repeat(9000)}`, warm: shells });
    expect(long).toMatchObject({ stdout: `${"x".repeat(9000)}\n`, warm: false });
  });

  it("kills the whole process group at the timeout, a background child included", async () => {
    await shells.warmUp();
    const pidFile = join(dir, "timeout.pid");
    const r = await runShell({
      command: `sleep 30 & echo $! > "${pidFile}"; wait`,
      timeoutSeconds: 0.5,
      warm: shells,
    });
    expect(r).toMatchObject({ timedOut: true, returnCode: -1, warm: true });
    const pid = Number(readFileSync(pidFile, "utf8"));
    await vi.waitFor(() => expect(isRunning(pid)).toBe(false), { timeout: 10_000 });
  });

  it("kills the whole process group when the run is cancelled", async () => {
    await shells.warmUp();
    const pidFile = join(dir, "cancel.pid");
    const controller = new AbortController();
    const run = runShell({
      command: `sleep 30 & echo $! > "${pidFile}.tmp"; mv "${pidFile}.tmp" "${pidFile}"; wait`,
      signal: controller.signal,
      warm: shells,
    });
    await vi.waitFor(() => expect(existsSync(pidFile)).toBe(true), { timeout: 10_000 });
    const pid = Number(readFileSync(pidFile, "utf8"));
    expect(isRunning(pid)).toBe(true);
    controller.abort();
    expect(await run).toMatchObject({ cancelled: true, warm: true });
    await vi.waitFor(() => expect(isRunning(pid)).toBe(false), { timeout: 10_000 });
  });

  it("answers when the command kills the watcher that would report its exit", async () => {
    await shells.warmUp();
    const started = Date.now();
    const r = await runShell({ command: "kill -9 $PPID; echo survived", warm: shells });
    expect(r).toMatchObject({ stdout: "survived\n", returnCode: -1, warm: true });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("follows changes to the server's environment", async () => {
    await shells.warmUp();
    const echo = () => runShell({ command: `echo "\${HANGAR_WARM_TEST-unset}"`, warm: shells });
    try {
      for (const value of ["first", "second"]) {
        process.env.HANGAR_WARM_TEST = value;
        expect((await echo()).stdout).toBe(`${value}\n`);
        await shells.warmUp();
        expect(await echo()).toMatchObject({ stdout: `${value}\n`, warm: true });
      }
    } finally {
      delete process.env.HANGAR_WARM_TEST;
    }
    expect((await echo()).stdout).toBe("unset\n");
  });

  it("goes on after its launcher is killed: its waiting shells die, commands run, a new launcher comes", async () => {
    await shells.warmUp();
    // Reported ready once forked: each is `/bin/sh -s` a few exec's later. A launcher retired by
    // an earlier test (the environment changed) may still be on its way out: wait for it to go.
    const shellsOf = (pid: number) => descendants(pid).filter((p) => p.args === "/bin/sh -s");
    await vi.waitFor(() => expect(launchers()).toHaveLength(1), { timeout: 5000 });
    const [launcher] = launchers();
    await vi.waitFor(() => expect(shellsOf(launcher.pid)).toHaveLength(2), { timeout: 10_000 });
    const waiting = shellsOf(launcher.pid);
    process.kill(launcher.pid, "SIGKILL");
    await vi.waitFor(() => expect(waiting.filter((p) => isRunning(p.pid))).toEqual([]), { timeout: 10_000 });
    expect((await runShell({ command: "echo still here", warm: shells })).stdout).toBe("still here\n");
    await vi.waitFor(
      async () => {
        await shells.warmUp();
        expect(await runShell({ command: "echo warm again", warm: shells })).toMatchObject({
          stdout: "warm again\n",
          warm: true,
        });
      },
      { timeout: 5000, interval: 200 },
    );
    expect(launchers().map((p) => p.pid)).not.toContain(launcher.pid);
  });
});

describe("a new pool", () => {
  it("removes the FIFO directories of servers that died, and only theirs", async () => {
    const exited = spawnSync("true");
    const stale = join(tmpdir(), `hangar-shells-${exited.pid}-test`);
    const living = join(tmpdir(), `hangar-shells-${process.ppid}-test`);
    for (const path of [stale, living]) mkdirSync(join(path, "sub"), { recursive: true });
    try {
      const pool = new WarmShells({ idle: 1 });
      await pool.warmUp();
      pool.close();
      await vi.waitFor(() => expect(existsSync(stale)).toBe(false), { timeout: 10_000 });
      expect(existsSync(living)).toBe(true);
    } finally {
      for (const path of [stale, living]) rmSync(path, { recursive: true, force: true });
    }
  });
});

describe("a closed pool", () => {
  it("leaves no launcher, waiting shell or FIFO directory behind", async () => {
    const before = { launchers: launchers().map((p) => p.pid), directories: fifoDirectories() };
    const pool = new WarmShells({ idle: 3 });
    await pool.warmUp();
    const [launcher] = launchers().filter((p) => !before.launchers.includes(p.pid));
    const [directory] = fifoDirectories().filter((name) => !before.directories.includes(name));
    await vi.waitFor(
      () => expect(descendants(launcher.pid).filter((p) => p.args === "/bin/sh -s")).toHaveLength(3),
      { timeout: 10_000 },
    );
    const family = [launcher, ...descendants(launcher.pid)];
    pool.close();
    await vi.waitFor(() => expect(family.filter((p) => isRunning(p.pid))).toEqual([]), { timeout: 10_000 });
    await vi.waitFor(() => expect(fifoDirectories()).not.toContain(directory), { timeout: 10_000 });
    expect(await runShell({ command: "echo spawned", warm: pool })).toMatchObject({
      stdout: "spawned\n",
      warm: false,
    });
  });
});
