/** The `hangar vm|config|logs` client commands against a real host service. */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProgram } from "../../src/cli/main.js";
import { startTestHost, type TestHost } from "../host/support.js";

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host.cleanup();
});

/** Runs the CLI in-process and returns what it printed. */
async function hangar(...args: string[]) {
  let out = "";
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string) => {
    out += chunk;
    return true;
  }) as typeof process.stdout.write;
  try {
    const program = buildProgram();
    program.exitOverride();
    await program.parseAsync(["node", "hangar", ...args]);
  } finally {
    process.stdout.write = write;
  }
  return out;
}

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
