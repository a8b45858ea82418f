/** The `hangar vm|config|logs` client commands against a real host service. */
import { type AddressInfo, createServer } from "node:net";
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
