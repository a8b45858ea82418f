/** The `hangar vm|config|logs` client commands against a real host service. */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../host/support.js";
import { runCli } from "../support/cli-in-process.js";

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host.cleanup();
});

const hangar = runCli;

describe("hangar vm / config / logs", () => {
  it("creates, lists as a table and as JSON, updates and deletes VMs", async () => {
    const url = ["--url", host.url];
    expect(await hangar("vm", "create", "cli-vm", "--memory", "512MB", "--disk-size", "8GB", ...url)).toBe(
      "Created cli-vm.\n",
    );
    const table = await hangar("vm", "ls", ...url);
    expect(table.split("\n")[0]).toMatch(
      /^NAME\s+OS\s+CPU\s+MEMORY\s+DISK \(USED\/SIZE\)\s+DISPLAY\s+STATUS/,
    );
    expect(table).toMatch(/cli-vm\s+linux\s+2\s+512 MiB\s+0 bytes\/8 GiB\s+1024x768\s+stopped/);
    const json = JSON.parse(await hangar("vm", "ls", "--json", ...url));
    expect(json).toEqual([expect.objectContaining({ name: "cli-vm", status: "stopped" })]);
    expect(await hangar("vm", "set", "cli-vm", "--cpu", "3", ...url)).toBe("Updated cli-vm.\n");
    expect(await hangar("vm", "get", "cli-vm", ...url)).toMatch(/^cpu:\s+3$/m);
    expect(await hangar("vm", "set", "cli-vm", "--idle-timeout", "5m", ...url)).toBe("Updated cli-vm.\n");
    expect(await hangar("vm", "get", "cli-vm", ...url)).toMatch(/^idle timeout:\s+300 s /m);
    await expect(hangar("vm", "set", "cli-vm", "--idle-mode", "disk", ...url)).rejects.toThrow(
      "A qemu desktop hibernates with 'memory', not 'disk'",
    );
    await expect(hangar("vm", "set", "cli-vm", "--idle-mode", "nap", ...url)).rejects.toThrow(
      "idleMode: Unknown hibernation mode 'nap' (expected memory, paused, disk, default)",
    );
    expect(await hangar("vm", "set", "cli-vm", "--idle-mode", "memory", ...url)).toBe("Updated cli-vm.\n");
    expect(await hangar("vm", "get", "cli-vm", ...url)).toMatch(
      /^idle timeout:\s+300 s \(hibernated with 'memory' when idle that long\)$/m,
    );
    expect(await hangar("vm", "set", "cli-vm", "--idle-mode", "default", ...url)).toBe("Updated cli-vm.\n");
    expect(JSON.parse(await hangar("vm", "get", "cli-vm", "--json", ...url)).idleMode).toBeNull();
    await expect(hangar("vm", "set", "cli-vm", "--idle-timeout", "0s", ...url)).rejects.toThrow(
      /idleTimeout/,
    );
    expect(await hangar("vm", "set", "cli-vm", "--idle-timeout", "off", ...url)).toBe("Updated cli-vm.\n");
    expect(await hangar("vm", "get", "cli-vm", ...url)).not.toMatch(/idle timeout/);
    expect(await hangar("vm", "clone", "cli-vm", "cli-copy", ...url)).toBe("Cloned cli-vm to cli-copy.\n");
    expect(await hangar("vm", "rm", "cli-copy", ...url)).toBe("Deleted cli-copy.\n");
  });

  it("shows the service's message on a failure, and says when the service is not running", async () => {
    await expect(hangar("vm", "get", "ghost", "--url", host.url)).rejects.toThrow(
      "Virtual machine not found: ghost",
    );
    await expect(hangar("vm", "stop", "cli-vm", "--url", host.url)).rejects.toThrow(
      "Virtual machine not running: cli-vm",
    );
    await expect(hangar("vm", "wait", "cli-vm", "--timeout", "5", "--url", host.url)).rejects.toThrow(
      "Virtual machine cli-vm is not running",
    );
    await expect(hangar("vm", "logs", "ghost", "--url", host.url)).rejects.toThrow(
      "Virtual machine not found: ghost",
    );
    await expect(hangar("vm", "create", "x", "--runtime", "lxc", "--url", host.url)).rejects.toThrow(
      "Invalid request body: runtime: Unknown runtime 'lxc' (expected qemu, container, kubernetes)",
    );
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const dead = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((r) => closed.close(r));
    await expect(hangar("vm", "ls", "--url", dead)).rejects.toThrow(
      `The host service is not running at ${dead} (start it with: hangar host serve)`,
    );
  });

  it("manages storage locations and shows logs", async () => {
    const url = ["--url", host.url];
    const path = `${host.root}/cli-store`;
    expect(await hangar("config", "storage", "add", "cli-store", path, ...url)).toBe(
      "Location added successfully\n",
    );
    expect(await hangar("config", "storage", "ls", ...url)).toMatch(/^cli-store\s+\S+cli-store$/m);
    expect(await hangar("config", "get", ...url)).toMatch(/^default location:\s+home$/m);
    expect(await hangar("logs", "info", "-n", "50", ...url)).toMatch(/^== info ==\n.*INFO: /);
  });
});

/** Runs the CLI in a process of its own, for its exit code (asynchronously: the service runs in this process). */
async function hangarProcess(...args: string[]) {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "-e", "import('./src/cli/main.ts').then((m) => m.main())", "--", "hangar", ...args],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (c: string) => {
    stdout += c;
  });
  child.stderr.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const [code] = await once(child, "exit");
  return { code, stdout, stderr };
}

describe("hangar's words", () => {
  it("usage errors exit 2 and say what is wrong before asking the service", async () => {
    const set = await hangarProcess("vm", "set", "cli-vm", "--url", host.url);
    expect(set.code).toBe(2);
    expect(set.stderr).toBe(
      "hangar: vm set: nothing to change: give at least one of --cpu, --memory, --disk-size, --display, --storage, --idle-timeout, --idle-mode\n",
    );
    const logs = await hangarProcess("logs", "bogus", "--url", host.url);
    expect(logs.code).toBe(2);
    expect(logs.stderr).toMatch(
      /value 'bogus' is invalid for argument 'type'\. Allowed choices are info, error, all\./,
    );
    expect((await hangarProcess("vm", "bogus")).code).toBe(2);
    const network = await hangarProcess("host", "serve", "--vm-network", "10.0.1");
    expect(network.code).toBe(2);
    expect(network.stderr).toMatch(
      /--vm-network <127\.A\.B>' argument '10\.0\.1' is invalid\. expected 127\.A\.B /,
    );
    const runtime = await hangarProcess("vm", "get", "ghost", "--url", host.url);
    expect([runtime.code, runtime.stderr]).toEqual([1, "hangar: Virtual machine not found: ghost\n"]);
  });

  it("config cache get|set, as lume has them", async () => {
    const url = ["--url", host.url];
    const dir = join(host.root, "cli-cache");
    expect(await hangar("config", "cache", "set", dir, ...url)).toBe("Configuration updated successfully\n");
    expect(await hangar("config", "cache", "get", ...url)).toBe(`${dir}\n`);
  });

  it("an empty cache is said to be empty, and images name the organization listed", async () => {
    const url = ["--url", host.url];
    expect(await hangar("vm", "prune", ...url)).toBe("The image cache was already empty.\n");
    expect(await hangar("vm", "images", ...url)).toBe(
      "No cached images of organization trycua (--organization for another).\n",
    );
    expect(await hangar("vm", "images", "--organization", "acme", ...url)).toBe(
      "No cached images of organization acme.\n",
    );
  });
});

describe("hangar host serve", () => {
  it("serves the API with settings under XDG_CONFIG_HOME and stops on SIGTERM", async () => {
    const root = mkdtempSync(join(tmpdir(), "hangar-serve-test-"));
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "-e",
        "import('./src/cli/main.ts').then((m) => m.main())",
        "--",
        "hangar",
        "host",
        "serve",
        "--port",
        "0",
      ],
      {
        env: { ...process.env, XDG_CONFIG_HOME: join(root, "config"), HOME: root, HANGAR_ACCEL: "tcg" },
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    try {
      let stderr = "";
      const url = await new Promise<string>((resolve, reject) => {
        child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
          stderr += chunk;
          const found = /"url":"(http:\/\/127\.0\.0\.1:\d+)"[^\n]*host service listening/.exec(stderr);
          if (found) resolve(found[1]);
        });
        child.once("exit", (code) => reject(new Error(`exited ${code}: ${stderr}`)));
      });
      const config = await (await fetch(`${url}/svc/config`)).json();
      expect(config.settingsFile).toBe(join(root, "config", "hangar", "config.yaml"));
      expect(config.homeDirectory).toBe(join(root, ".hangar"));
      expect(await (await fetch(`${url}/svc/vms`)).json()).toEqual([]);
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      child.kill("SIGKILL");
      rmSync(root, { recursive: true, force: true });
    }
  });
});
