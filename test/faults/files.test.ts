/**
 * Fault suite, files (issue rows 3, 8, 9 and 15): a FIFO or a device cannot freeze the file
 * commands or the screenshots; writes through a symbolic link keep the link; /proc files read
 * whole; temporary files of interrupted writes are removed at the next start.
 */
import { execFileSync, spawnSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startTestServer } from "../support/server.js";
import { freeDisplayNumber, killXvfb, startXvfb } from "../support/xvfb.js";
import { serveProcess } from "./support.js";

const b64 = (text: string) => Buffer.from(text).toString("base64");

describe("file commands under faults", () => {
  const dir = mkdtempSync(join(tmpdir(), "hangar-faults-files-"));
  const n = freeDisplayNumber();
  let xvfb: Awaited<ReturnType<typeof startXvfb>>;
  let manager: DesktopManager;
  let server: Awaited<ReturnType<typeof startTestServer>>;

  beforeAll(async () => {
    xvfb = await startXvfb(n);
    manager = new DesktopManager({ display: `:${n}` });
    server = await startTestServer({ desktop: manager.provider });
  });
  afterAll(async () => {
    await server?.close();
    await manager?.close();
    if (xvfb) await killXvfb(xvfb, n);
    rmSync(dir, { recursive: true, force: true });
  });

  it("FIFOs without a writer are refused at once; file commands and screenshots keep answering", async () => {
    const fifos = [1, 2, 3, 4].map((i) => join(dir, `fifo-${i}`));
    for (const fifo of fifos) execFileSync("mkfifo", [fifo]);
    const started = Date.now();
    // A hang fails here within seconds instead of timing out the suite.
    const init = () => ({ signal: AbortSignal.timeout(5000) });
    const reads = await Promise.all([
      ...fifos.map((path) => server.cmd("read_text", { path }, init())),
      server.cmd("read_bytes", { path: fifos[0], length: 10 }, init()),
      server.cmd("write_bytes", { path: fifos[1], content_b64: b64("x"), append: true }, init()),
    ]);
    for (const { event } of reads) {
      expect(event).toMatchObject({ success: false, code: "failed" });
      expect(event.error).toMatch(/^Not a regular file \(a FIFO\)/);
    }
    const [exists, shot] = await Promise.all([
      server.cmd("file_exists", { path: fifos[0] }, init()),
      server.cmd("screenshot", undefined, init()),
    ]);
    expect(exists.event).toMatchObject({ success: true, exists: false });
    expect(shot.event).toMatchObject({ success: true, width: 640, height: 480 });
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it("refuses character devices where a file is needed", async () => {
    const { event } = await server.cmd("read_bytes", { path: "/dev/zero", length: 4 });
    expect(event).toMatchObject({ success: false, code: "failed" });
    expect(event.error).toContain("a character device");
  });

  it("writing through a symbolic link writes its target and keeps the link", async () => {
    const target = join(dir, "target.txt");
    const link = join(dir, "link.txt");
    writeFileSync(target, "old");
    symlinkSync("target.txt", link);
    expect((await server.cmd("write_text", { path: link, content: "new" })).event.success).toBe(true);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe("target.txt");
    expect(readFileSync(target, "utf8")).toBe("new");
    // A dangling link: the file it names is created, as an editor would.
    const dangling = join(dir, "dangling.txt");
    symlinkSync(join(dir, "created.txt"), dangling);
    await server.cmd("write_bytes", { path: dangling, content_b64: b64("made") });
    expect(lstatSync(dangling).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(dir, "created.txt"), "utf8")).toBe("made");
  });

  it("read_bytes reads /proc files, whose size says 0, up to the length asked", async () => {
    const whole = readFileSync("/proc/version");
    const all = await server.cmd("read_bytes", { path: "/proc/version" });
    expect(Buffer.from(all.event.content_b64, "base64").equals(whole)).toBe(true);
    const part = await server.cmd("read_bytes", { path: "/proc/version", offset: 2, length: 5 });
    expect(Buffer.from(part.event.content_b64, "base64").equals(whole.subarray(2, 7))).toBe(true);
  });

  it("removes the temporary file of a write that a crash interrupted, at the next start", async () => {
    const state = join(dir, "state");
    const journal = join(state, "hangar", "writes");
    mkdirSync(journal, { recursive: true });
    // A process that is gone: its pid names the journal entry of the write it never finished.
    const gone = spawnSync("sh", ["-c", "echo $$"], { encoding: "utf8" }).stdout.trim();
    const leftover = join(dir, ".report.txt.0123456789ab.tmp");
    writeFileSync(leftover, "half a rep");
    symlinkSync(leftover, join(journal, `${gone}.0123456789ab`));

    const serve = await serveProcess([], { env: { XDG_STATE_HOME: state } });
    try {
      await expect.poll(() => existsSync(leftover), { timeout: 3000 }).toBe(false);
      expect(existsSync(join(journal, `${gone}.0123456789ab`))).toBe(false);
    } finally {
      await serve.stop();
    }
  });
});
