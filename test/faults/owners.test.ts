/**
 * Fault suite, owners: what a server starts dies with it, however it ends. Each test kills the
 * server with SIGKILL, which lets it clean up nothing, and then looks from /proc, as an operator
 * would, for what it had started: the host service's KVM probe (a QEMU and its temporary
 * directory), and `hangar serve`'s desktop (Xvfb, openbox and its configuration's directory, the
 * session and accessibility buses, the panel), warm shells with a command running, a terminal and a
 * recording's encoder. The directories are removed by the next start.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { REAPER_NAME } from "../../src/os/group-reaper.js";
import { killProcess, spawnServiceProcess } from "../host/support.js";
import { postCommand } from "../support/clients.js";
import { descendants, isRunning, type ProcessEntry, processesNamed } from "../support/processes.js";
import { serveProcess } from "./support.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** What of `family` still runs, as `pid args` lines (an empty list when all of it ended). */
const stillRunning = (family: ProcessEntry[]) =>
  family.filter((p) => isRunning(p.pid)).map((p) => `${p.pid} ${p.args}`);

const tempDirs = (prefix: string) => readdirSync(tmpdir()).filter((name) => name.startsWith(prefix));

describe("a host service killed with SIGKILL", () => {
  it("takes the KVM probe's QEMU with it, and the next service removes the probe's directory", async () => {
    // The probe runs QEMU only where /dev/kvm opens (this machine's tests run as root with KVM).
    expect(existsSync("/dev/kvm")).toBe(true);
    const root = mkdtempSync(join(tmpdir(), "hangar-owners-"));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    const first = await spawnServiceProcess(join(root, "first"));
    cleanups.push(() => killProcess(first.child));
    // The service probes once it starts; its QEMU runs for about three seconds.
    const qemu = await vi.waitFor(
      () => {
        const found = descendants(first.child.pid!).find((p) => p.args.includes("hangar-kvm-probe-"));
        if (!found) throw new Error("no probe running yet");
        return found;
      },
      { timeout: 20_000, interval: 10 },
    );
    expect(qemu.args).toMatch(/(^|\/)qemu-system-\S+ .*-machine accel=kvm/);
    const [dir] = tempDirs("hangar-kvm-probe-");
    expect(dir).toBeDefined();

    await killProcess(first.child);
    await vi.waitFor(() => expect(stillRunning([qemu])).toEqual([]), { timeout: 5000, interval: 20 });
    expect(tempDirs("hangar-kvm-probe-")).toContain(dir);

    const second = await spawnServiceProcess(join(root, "second"));
    cleanups.push(() => killProcess(second.child));
    // The status answers once the second service's probe is done; the directory went before it began.
    const status = await fetch(`${second.url}/svc/host/status`).then((r) => r.json());
    expect(["kvm", "tcg"]).toContain(status.accelerator);
    expect(tempDirs("hangar-kvm-probe-")).toEqual([]);
  }, 60_000);
});

describe("hangar serve killed with SIGKILL", () => {
  it("takes its desktop, its shells, a running command, a terminal and a recording's encoder with it", async () => {
    const serve = await serveProcess(["--panel"], { display: "640x480" });
    cleanups.push(() => serve.stop());
    const recording = join(mkdtempSync(join(tmpdir(), "hangar-owners-")), "video.mp4");
    cleanups.push(() => rmSync(join(recording, ".."), { recursive: true, force: true }));

    // The warm shells' launcher starts with the first command; the next one runs until killed.
    expect((await postCommand(serve.url, "run_command", { command: "echo warm" })).event.stdout).toBe(
      "warm\n",
    );
    void postCommand(serve.url, "run_command", { command: "sleep 30.31" }).catch(() => undefined);
    const terminal = await fetch(`${serve.url}/pty`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ command: "sleep 30.32" }),
    });
    expect(terminal.status).toBe(200);
    const started = await postCommand(serve.url, "start_recording", { path: recording, fps: 5 });
    expect(started.event).toMatchObject({ success: true });

    const family = await vi.waitFor(
      () => {
        const all = descendants(serve.pid);
        const has = (pattern: RegExp) => all.some((p) => pattern.test(p.args));
        for (const pattern of [
          /(^|\/)Xvfb /,
          /(^|\/)openbox /,
          /(^|\/)dbus-daemon /,
          /at-spi-bus-launcher/,
          /^lxpanel/,
        ]) {
          if (!has(pattern)) throw new Error(`${pattern} is not running yet`);
        }
        for (const pattern of [/ffmpeg/, /^sleep 30\.31$/, /^sleep 30\.32$/, /^\/bin\/sh -s$/]) {
          if (!has(pattern)) throw new Error(`${pattern} is not running yet`);
        }
        return all;
      },
      { timeout: 15_000, interval: 50 },
    );

    const [openbox] = tempDirs("hangar-openbox-");
    expect(openbox).toBeDefined();

    process.kill(serve.pid, "SIGKILL");
    await vi.waitFor(() => expect(stillRunning(family)).toEqual([]), { timeout: 10_000, interval: 50 });
    // Its window manager's configuration is removed by the next desktop that starts.
    expect(tempDirs("hangar-openbox-")).toContain(openbox);
    const next = await serveProcess([], { display: "640x480" });
    cleanups.push(() => next.stop());
    await vi.waitFor(() => expect(tempDirs("hangar-openbox-")).not.toContain(openbox), {
      timeout: 10_000,
      interval: 50,
    });
  }, 60_000);
});

describe("a process that spawned a shell, killed with SIGKILL", () => {
  it("takes the shell's whole process group with it (not a warm shell: a spawned one)", async () => {
    // The shell's command forks (dash does not exec it) and starts one more in the background.
    const script = [
      `import { runShell } from ${JSON.stringify(join(process.cwd(), "src/os/process.ts"))};`,
      `void runShell({ command: "sleep 30.41 & sleep 30.42" });`,
      "setInterval(() => undefined, 1000);",
    ].join("\n");
    const owner = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: "ignore",
    });
    cleanups.push(() => {
      owner.kill("SIGKILL");
    });
    const family = await vi.waitFor(
      () => {
        const all = descendants(owner.pid!);
        for (const pattern of [/^sleep 30\.41$/, /^sleep 30\.42$/]) {
          if (!all.some((p) => pattern.test(p.args))) throw new Error(`${pattern} is not running yet`);
        }
        return all.filter((p) => /sleep 30\.4/.test(p.args));
      },
      // tsx compiles the module first: on a loaded machine that alone can take many seconds.
      { timeout: 40_000, interval: 50 },
    );
    process.kill(owner.pid!, "SIGKILL");
    // Should it fail: the reapers running then (pid, parent, state), to tell a reaper that never
    // ran its kill from one that was gone.
    const reapers = () =>
      `reapers: ${JSON.stringify(processesNamed(REAPER_NAME).map((p) => `${p.pid} ${p.ppid} ${p.state}`))}`;
    await vi.waitFor(() => expect(stillRunning(family), reapers()).toEqual([]), {
      timeout: 10_000,
      interval: 50,
    });
  }, 60_000);
});
