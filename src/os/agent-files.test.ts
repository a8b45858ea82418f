/**
 * The command user's file system (agent-files.ts), run as nobody as `--command-user nobody` would:
 * it reads and writes what nobody may and nothing else, what it writes belongs to nobody, and a
 * worker that dies is replaced at the next call.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentFileSystem } from "./agent-files.js";
import { resolveCommandUser } from "./command-user.js";
import { openRegularFile, readInto, writeStreamed, writeWhole } from "./files.js";
import { makeDirectory } from "./make-directory.js";

const NOBODY = 65534;
let dir: string;
let files: AgentFileSystem;

beforeAll(() => {
  // The suite's temp dir (test/support/leftovers.ts) is 0700: nobody may pass through it, not list it.
  chmodSync(tmpdir(), 0o711);
  dir = mkdtempSync(join(tmpdir(), "hangar-agent-files-"));
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, "shared"), { mode: 0o777 });
  chmodSync(join(dir, "shared"), 0o777);
  writeFileSync(join(dir, "secret"), "root only\n", { mode: 0o600 });
  writeFileSync(join(dir, "public"), "anyone\n", { mode: 0o644 });
  files = new AgentFileSystem(resolveCommandUser("nobody"));
});

afterAll(() => {
  files?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the command user's file system", () => {
  it("reads what the user may read, and refuses the rest with the system's error", async () => {
    const { handle, size } = await openRegularFile(join(dir, "public"), "public", files);
    const buffer = Buffer.alloc(size);
    expect(await readInto(handle, buffer, size, 0)).toBe(size);
    await handle.close();
    expect(buffer.toString()).toBe("anyone\n");
    await expect(openRegularFile(join(dir, "secret"), "secret", files)).rejects.toMatchObject({
      code: "EACCES",
    });
    await expect(files.stat(join(dir, "missing"))).rejects.toMatchObject({ code: "ENOENT" });
    expect((await files.stat(join(dir, "secret"))).isFile()).toBe(true);
    expect((await files.readdirEntries(dir)).map((e) => [e.name, e.isDirectory()]).sort()).toEqual([
      ["public", false],
      ["secret", false],
      ["shared", true],
    ]);
  });

  it("writes as the user: files it may not replace are refused, what it makes is its own", async () => {
    await expect(writeWhole(join(dir, "public"), "replaced", { files })).rejects.toMatchObject({
      code: "EACCES",
    });
    expect(readFileSync(join(dir, "public"), "utf8")).toBe("anyone\n");
    const made = join(dir, "shared", "a", "b", "note.txt");
    await writeWhole(made, "hello", { parents: true, files });
    expect(readFileSync(made, "utf8")).toBe("hello");
    expect(statSync(made).uid).toBe(NOBODY);
    expect(statSync(join(dir, "shared", "a")).uid).toBe(NOBODY);
    // Streamed in pieces, larger than one message of the worker.
    const big = Buffer.alloc(9 * 1024 * 1024 + 17, 7);
    const streamed = join(dir, "shared", "big.bin");
    const chunks = Array.from({ length: Math.ceil(big.length / 65536) }, (_, i) =>
      big.subarray(i * 65536, (i + 1) * 65536),
    );
    expect(await writeStreamed(streamed, Readable.from(chunks), files)).toBe(big.length);
    expect(readFileSync(streamed).equals(big)).toBe(true);
    expect(statSync(streamed).uid).toBe(NOBODY);
    await makeDirectory(join(dir, "shared", "c", "d"), files);
    expect(statSync(join(dir, "shared", "c", "d")).uid).toBe(NOBODY);
  });

  it("runs as the user, and a worker that dies is replaced at the next call", async () => {
    await files.stat(dir);
    const pid = workerPid(files);
    expect(uidOf(pid)).toBe(NOBODY);
    // Its environment is the user's, none of the server's.
    const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
    expect(environ.some((v) => v.startsWith("HOME="))).toBe(true);
    expect(
      environ.filter(
        (v) => !/^(PATH|HOME|USER|LOGNAME|NODE_CHANNEL_FD|NODE_CHANNEL_SERIALIZATION_MODE)=/.test(v) && v,
      ),
    ).toEqual([]);
    process.kill(pid, "SIGKILL");
    // Calls fail while it is gone, then a new one serves them.
    let info: Awaited<ReturnType<typeof files.stat>> | undefined;
    for (let i = 0; i < 100 && !info; i++)
      info = await files.stat(join(dir, "public")).catch(() => undefined);
    expect(info?.size).toBe(7);
    expect(workerPid(files)).not.toBe(pid);
  });
});

describe("a server killed with -9", () => {
  it("takes its file worker with it", async () => {
    const module = new URL("./agent-files.ts", import.meta.url).pathname;
    const script = `const { AgentFileSystem } = await import(${JSON.stringify(module)});
      const { resolveCommandUser } = await import(${JSON.stringify(new URL("./command-user.ts", import.meta.url).pathname)});
      const files = new AgentFileSystem(resolveCommandUser("nobody"));
      await files.stat("/");
      console.log(files.child.pid);
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const [line] = (await once(child.stdout!, "data")) as [Buffer];
    const worker = Number(line.toString().trim());
    expect(uidOf(worker)).toBe(NOBODY);
    child.kill("SIGKILL");
    await once(child, "exit");
    // The worker sees its channel close and exits: nothing of the agent's user outlives the server.
    const deadline = Date.now() + 10_000;
    // Not our child, so no exit event to wait for: its /proc entry is polled until it goes.
    while (existsSync(`/proc/${worker}`) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(existsSync(`/proc/${worker}`)).toBe(false);
  });
});

function workerPid(fs: AgentFileSystem): number {
  const pid = (fs as unknown as { child?: { pid?: number } }).child?.pid;
  if (!pid) throw new Error("no file worker");
  return pid;
}

function uidOf(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("Uid:"));
  return Number(line?.split(/\s+/)[1]);
}
