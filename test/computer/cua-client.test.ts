/**
 * cua's published TypeScript client `@trycua/computer` (0.1.3) against Hangar, unmodified: only its
 * `ip` getter is pointed at the test server. Local mode in this process over ws://; cloud mode in a
 * child process over wss:// with the authenticate handshake and the test's certificate trusted.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningComputerServer, startComputerServer } from "../../src/computer/server.js";
import { makeTestCertificate } from "../support/tls.js";

process.env.CUA_TELEMETRY = "off";
const { Computer, OSType } = await import("@trycua/computer");

class HangarComputer extends Computer {
  constructor(private readonly address: string) {
    super({ name: "hangar-local", osType: OSType.LINUX, apiKey: "" });
  }
  override get ip(): string {
    return this.address;
  }
}

let server: RunningComputerServer;
let computer: HangarComputer;
const dir = mkdtempSync(join(tmpdir(), "hangar-cua-"));

beforeAll(async () => {
  server = await startComputerServer({ port: 0 });
  computer = new HangarComputer(`127.0.0.1:${server.port}`);
  await computer.run();
});
afterAll(async () => {
  await computer?.disconnect();
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("@trycua/computer in local mode", () => {
  it("runs shell commands and reads their output", async () => {
    expect(await computer.interface.runCommand("echo hello; echo oops >&2")).toEqual(["hello\n", "oops\n"]);
    await expect(computer.interface.runCommand("")).rejects.toThrow(/command/);
  });

  it("writes, reads, lists and deletes files and directories", async () => {
    const sub = join(dir, "sub");
    await computer.interface.createDir(sub);
    expect(await computer.interface.directoryExists(sub)).toBe(true);
    const file = join(sub, "note.txt");
    await computer.interface.writeText(file, "héllo ✓");
    expect(await computer.interface.fileExists(file)).toBe(true);
    expect(await computer.interface.readText(file)).toBe("héllo ✓");
    expect(readFileSync(file, "utf8")).toBe("héllo ✓");
    const listing = await computer.interface.listDir(sub);
    expect(listing).toContain("note.txt");
    const iface = computer.interface as unknown as { getFileSize(path: string): Promise<number> };
    expect(await iface.getFileSize(file)).toBe(Buffer.byteLength("héllo ✓"));
    await computer.interface.deleteFile(file);
    expect(await computer.interface.fileExists(file)).toBe(false);
    await computer.interface.deleteDir(sub);
    expect(await computer.interface.directoryExists(sub)).toBe(false);
  });

  it("moves a file over 5 MiB both ways in the 1 MiB chunks the client makes", async () => {
    const data = randomBytes(6 * 1024 * 1024 + 123);
    const up = join(dir, "up.bin");
    await computer.interface.writeBytes(up, data);
    expect(readFileSync(up).equals(data)).toBe(true);
    const down = join(dir, "down.bin");
    writeFileSync(down, data);
    expect((await computer.interface.readBytes(down)).equals(data)).toBe(true);
  });

  it("rejects with the server's error for a failed command", async () => {
    await expect(computer.interface.readText(join(dir, "missing.txt"))).rejects.toThrow(/No such file/);
  });
});

describe("@trycua/computer in cloud mode", () => {
  it("authenticates over wss:// with its API key and runs commands", async () => {
    const cert = makeTestCertificate();
    const cloud = await startComputerServer({
      port: 0,
      tls: { cert: cert.cert, key: cert.key },
      cloud: { containerName: "vm-cua", keys: ["sk-cua-client-test"], limiter: false },
    });
    try {
      const { stdout } = await promisify(execFile)(process.execPath, ["test/support/cua-client.mjs"], {
        env: {
          ...process.env,
          NODE_EXTRA_CA_CERTS: cert.certPath,
          HANGAR_ADDRESS: `127.0.0.1:${cloud.port}`,
          HANGAR_DIR: dir,
          CUA_VM_NAME: "vm-cua",
          CUA_API_KEY: "sk-cua-client-test",
        },
        timeout: 30_000,
      });
      const result = /^HANGAR_RESULT (.*)$/m.exec(stdout)?.[1];
      expect(JSON.parse(result ?? "null")).toEqual({ stdout: "over-the-wire\n", text: "héllo cloud" });
    } finally {
      await cloud.close();
      cert.remove();
    }
  });
});
