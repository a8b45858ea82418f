/** What a running VM leaves on disk, and how a (re)started service tells a live QEMU from a stale file. */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { liveSession, qmpSocketPath, writeSession } from "./session.js";

const root = mkdtempSync(join(tmpdir(), "hangar-session-test-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("sessions", () => {
  it("keeps the QMP socket inside the VM directory unless the path is too long for a socket", () => {
    expect(qmpSocketPath("/srv/vms/dev")).toBe("/srv/vms/dev/qmp.sock");
    const deep = `/srv/${"d".repeat(120)}/dev`;
    const short = qmpSocketPath(deep);
    expect(short).toMatch(/hangar-qmp-[0-9a-f]{16}\.sock$/);
    expect(Buffer.byteLength(short)).toBeLessThan(108);
    expect(qmpSocketPath(deep)).toBe(short);
  });

  it("treats a session whose pid is some other process as stale, and removes it", async () => {
    const dir = join(root, "reused-pid");
    mkdirSync(dir);
    // This test process is alive, but it is not the QEMU serving that socket.
    await writeSession(dir, {
      pid: process.pid,
      qmpSocket: join(dir, "qmp.sock"),
      accelerator: "tcg",
      ipAddress: "127.0.1.2",
      forwardedPorts: { "8000": 8000 },
      vnc: { host: "127.0.0.1", port: 5900, password: "secret12" },
      sharedDirectories: [],
      startedAt: new Date().toISOString(),
    });
    writeFileSync(join(dir, "qemu.pid"), String(process.pid));
    expect(await liveSession(dir)).toBeUndefined();
    expect(existsSync(join(dir, "session.json"))).toBe(false);
    expect(existsSync(join(dir, "qemu.pid"))).toBe(false);
  });

  it("a VM that never ran has no session and nothing is touched", async () => {
    const dir = join(root, "never-ran");
    mkdirSync(dir);
    writeFileSync(join(dir, "config.json"), "{}");
    expect(await liveSession(dir)).toBeUndefined();
    expect(existsSync(join(dir, "config.json"))).toBe(true);
  });
});
