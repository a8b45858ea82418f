/**
 * cua's published TypeScript client `@trycua/computer` (0.1.3) against Hangar, unmodified: only its
 * `ip` getter is pointed at the test server. Local mode in this process over ws://; cloud mode in a
 * child process over wss:// with the authenticate handshake and the test's certificate trusted.
 */
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningComputerServer, startComputerServer } from "../../src/computer/server.js";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
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

describe("@trycua/computer driving a desktop (Xvfb + openbox)", () => {
  let display: VirtualDisplay;
  let manager: DesktopManager;
  let desktopServer: RunningComputerServer;
  let desk: HangarComputer;
  beforeAll(async () => {
    display = await startVirtualDisplay({ width: 1280, height: 800 });
    manager = new DesktopManager({ display: display.display });
    desktopServer = await startComputerServer({ port: 0, desktop: manager.provider });
    desk = new HangarComputer(`127.0.0.1:${desktopServer.port}`);
    await desk.run();
  });
  afterAll(async () => {
    await desk?.disconnect();
    await desktopServer?.close();
    await manager?.close();
    await display?.stop();
  });

  it("reads the screen size and takes a PNG screenshot of that size", async () => {
    expect(await desk.interface.getScreenSize()).toEqual({ width: 1280, height: 800 });
    const png = await desk.interface.screenshot();
    expect(png.subarray(1, 4).toString()).toBe("PNG");
    expect(png.readUInt32BE(16)).toBe(1280);
    expect(png.readUInt32BE(20)).toBe(800);
  });

  it("moves the cursor and clicks where it is told", async () => {
    await desk.interface.moveCursor(321, 234);
    expect(await desk.interface.getCursorPosition()).toEqual({ x: 321, y: 234 });
    await desk.interface.leftClick(400, 300);
    expect(await desk.interface.getCursorPosition()).toEqual({ x: 400, y: 300 });
    await desk.interface.rightClick(10, 10);
    await desk.interface.doubleClick(500, 400);
    expect(await desk.interface.getCursorPosition()).toEqual({ x: 500, y: 400 });
  });

  it("types exact Unicode text into a terminal it clicked into", async () => {
    const out = join(dir, "typed.txt");
    const title = `hangar-typing-${process.pid}`;
    const xterm = spawn("xterm", ["-T", title, "-e", "sh", "-c", `cat > ${out}`], {
      env: { ...process.env, ...display.env },
      stdio: "ignore",
    });
    try {
      const { stdout } = await promisify(execFile)(
        "xdotool",
        ["search", "--sync", "--onlyvisible", "--name", title, "getwindowgeometry", "--shell"],
        { env: { ...process.env, ...display.env }, timeout: 10_000 },
      );
      const geometry = Object.fromEntries(
        stdout
          .trim()
          .split("\n")
          .map((l) => l.split("=")),
      );
      await desk.interface.leftClick(
        Number(geometry.X) + Number(geometry.WIDTH) / 2,
        Number(geometry.Y) + Number(geometry.HEIGHT) / 2,
      );
      await desk.interface.typeText("héllo wörld → ok");
      await desk.interface.pressKey("enter");
      let typed = "";
      for (let i = 0; i < 50 && !typed.includes("\n"); i++) {
        await new Promise((r) => setTimeout(r, 100));
        typed = existsSync(out) ? readFileSync(out, "utf8") : "";
      }
      expect(typed).toBe("héllo wörld → ok\n");
    } finally {
      xterm.kill();
    }
  });

  it("sets and reads the clipboard", async () => {
    await desk.interface.setClipboard("clip ✓ board");
    expect(await desk.interface.copyToClipboard()).toBe("clip ✓ board");
  });
});
