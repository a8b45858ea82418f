import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { descendants } from "../support/processes.js";
import { startTestServer } from "../support/server.js";

let server: Awaited<ReturnType<typeof startTestServer>>;
let dir: string;
beforeAll(async () => {
  server = await startTestServer();
  dir = realpathSync(mkdtempSync(join(tmpdir(), "hangar-shell-")));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Running, not merely a zombie waiting for its parent to reap it. */
function alive(pid: number) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

describe("run_command", () => {
  it("returns stdout, stderr and the exit code; a non-zero exit is still a success", async () => {
    const r = await server.cmd("run_command", { command: "echo out; echo err >&2; exit 3" });
    expect(r.event).toMatchObject({ success: true, stdout: "out\n", stderr: "err\n", return_code: 3 });
    expect(r.event.content).toEqual({ stdout: "out\n", stderr: "err\n", return_code: 3 });
  });

  it("answers through its aliases shell and exec", async () => {
    for (const alias of ["shell", "exec"]) {
      expect((await server.cmd(alias, { command: "printf hi" })).event.stdout).toBe("hi");
    }
  });

  it("honours cwd and env", async () => {
    const r = await server.cmd("run_command", {
      command: 'pwd; echo "$GREETING"',
      cwd: dir,
      env: { GREETING: "héllo" },
    });
    expect(r.event.stdout).toBe(`${dir}\nhéllo\n`);
  });

  it("names a working directory that does not exist", async () => {
    const r = await server.cmd("run_command", { command: "true", cwd: join(dir, "missing") });
    expect(r.event).toMatchObject({ success: false, code: "not_found" });
    expect(r.event.error).toContain("missing");
  });

  it("kills the whole process group on timeout and answers with the reference's shape", async () => {
    const pidFile = join(dir, "bg.pid");
    const started = Date.now();
    const r = await server.cmd("run_command", {
      command: `sleep 30 & echo $! > ${pidFile}; wait`,
      timeout: 0.5,
    });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(r.event).toMatchObject({
      success: false,
      code: "timeout",
      stderr: "Command timed out after 0.5s",
      return_code: -1,
    });
    const pid = Number(readFileSync(pidFile, "utf8"));
    await vi.waitFor(() => expect(alive(pid)).toBe(false), { timeout: 10_000 });
  });

  it("kills the process group when the client goes away", async () => {
    const pidFile = join(dir, "gone.pid");
    const controller = new AbortController();
    const request = fetch(`${server.url}/cmd`, {
      method: "POST",
      body: JSON.stringify({ command: "run_command", params: { command: `echo $$ > ${pidFile}; sleep 30` } }),
      signal: controller.signal,
    }).catch(() => undefined);
    await vi.waitFor(() => expect(existsSync(pidFile)).toBe(true), { timeout: 5000 });
    const pid = Number(readFileSync(pidFile, "utf8"));
    expect(alive(pid)).toBe(true);
    controller.abort();
    await request;
    await vi.waitFor(() => expect(alive(pid)).toBe(false), { timeout: 10_000 });
  });

  it("rejects wrong parameter types naming the field", async () => {
    const r = await server.cmd("run_command", { command: "true", timeout: "soon" });
    expect(r.event).toMatchObject({ success: false, code: "invalid_params" });
    expect(r.event.error).toMatch(/timeout/);
    const missing = await server.cmd("run_command", {});
    expect(missing.event.error).toMatch(/command/);
  });

  it("refuses parameters it does not know, and runs nothing", async () => {
    const r = await server.cmd("run_command", { command: "echo ok", color: "blue" });
    expect(r.event).toMatchObject({ success: false, code: "invalid_params" });
    expect(r.event.error).toMatch(/unknown parameter 'color' for run_command/);
  });
});

describe("warm shells", () => {
  /** The shell a command ran in, as its own /proc entry says. */
  const shellOf = async (target: Awaited<ReturnType<typeof startTestServer>>) =>
    (await target.cmd("run_command", { command: "tr '\\0' ' ' < /proc/$$/cmdline" })).event.stdout;

  it("run commands once they wait, and a client that goes away still kills the whole group", async () => {
    // The first command starts the launcher; the next ones find shells waiting.
    await vi.waitFor(async () => expect(await shellOf(server)).toBe("/bin/sh -s "), {
      timeout: 10_000,
      interval: 100,
    });
    const [shellFile, pidFile] = [join(dir, "warm.shell"), join(dir, "warm.pid")];
    const controller = new AbortController();
    const request = fetch(`${server.url}/cmd`, {
      method: "POST",
      body: JSON.stringify({
        command: "run_command",
        params: {
          command: `tr '\\0' ' ' < /proc/$$/cmdline > ${shellFile}; sleep 30 & echo $! > ${pidFile}.tmp; mv ${pidFile}.tmp ${pidFile}; wait`,
        },
      }),
      signal: controller.signal,
    }).catch(() => undefined);
    await vi.waitFor(() => expect(existsSync(pidFile)).toBe(true), { timeout: 5000 });
    const pid = Number(readFileSync(pidFile, "utf8"));
    expect(readFileSync(shellFile, "utf8")).toBe("/bin/sh -s ");
    expect(alive(pid)).toBe(true);
    controller.abort();
    await request;
    await vi.waitFor(() => expect(alive(pid)).toBe(false), { timeout: 10_000 });
  });

  it("leave nothing behind when the server closes: no launcher, no waiting shell, no FIFO directory", async () => {
    const directoriesBefore = fifoDirectories();
    const other = await startTestServer();
    await vi.waitFor(async () => expect(await shellOf(other)).toBe("/bin/sh -s "), {
      timeout: 10_000,
      interval: 100,
    });
    const [directory] = fifoDirectories().filter((name) => !directoriesBefore.includes(name));
    // Its launcher: `/bin/sh -c <script> sh <its directory>`.
    const launcher = descendants(process.pid).find(
      (p) => p.ppid === process.pid && p.args.includes(`/${directory}`),
    );
    expect(launcher).toBeDefined();
    const family = [launcher!, ...descendants(launcher!.pid)];
    expect(family.filter((p) => p.args === "/bin/sh -s").length).toBeGreaterThan(0);
    await other.close();
    await vi.waitFor(() => expect(family.filter((p) => alive(p.pid))).toEqual([]), { timeout: 10_000 });
    await vi.waitFor(() => expect(fifoDirectories()).not.toContain(directory), { timeout: 10_000 });
  });
});

/** This process's warm-shell FIFO directories. */
function fifoDirectories() {
  return readdirSync(tmpdir()).filter((name) => name.startsWith(`hangar-shells-${process.pid}-`));
}

describe("batch", () => {
  it("runs steps in order and returns one cua-shaped result per step", async () => {
    const r = await server.cmd("batch", {
      commands: [
        { command: "write_text", params: { path: join(dir, "b.txt"), content: "one" } },
        { command: "read_file", params: { path: join(dir, "b.txt") } },
        { command: "version" },
      ],
    });
    expect(r.event.success).toBe(true);
    expect(r.event.results).toEqual([
      { success: true },
      { success: true, content: "one" },
      { success: true, protocol: 1, package: expect.any(String) },
    ]);
  });

  it("stops at the first failure and says which step failed", async () => {
    const marker = join(dir, "never.txt");
    const r = await server.cmd("batch", {
      commands: [
        { command: "version" },
        { command: "read_text", params: { path: join(dir, "nope.txt") } },
        { command: "write_text", params: { path: marker, content: "x" } },
      ],
    });
    expect(r.event).toMatchObject({ success: false, code: "not_found" });
    expect(r.event.error).toMatch(/^Step 2 \(read_text\) failed: No such file/);
    expect(r.event.results).toHaveLength(2);
    expect(existsSync(marker)).toBe(false);
  });

  it("reports an unknown command inside a batch and refuses nested batches", async () => {
    const unknown = await server.cmd("batch", { commands: [{ command: "nope" }] });
    expect(unknown.event).toMatchObject({ success: false, code: "unknown_command" });
    const nested = await server.cmd("batch", { commands: [{ command: "batch", params: { commands: [] } }] });
    expect(nested.event).toMatchObject({ success: false, code: "invalid_params" });
  });
});
