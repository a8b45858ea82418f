/**
 * envd (docs/e2b.md) driven by E2B's own SDK, unmodified (`e2b` from npm): a `Sandbox` made with the
 * SDK's constructor and `sandboxUrl` pointing at the server's envd listener, so every call goes over
 * the SDK's own Connect transport (JSON) and HTTP client, with no control plane. Where the SDK has no
 * call (StreamInput, the polling watcher, protobuf on the wire, raw error codes), a Connect client
 * made from Hangar's generated descriptors speaks to the same listener.
 */
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { fileDesc } from "@bufbuild/protobuf/codegenv2";
import { file_google_protobuf_timestamp } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { AuthenticationError, CommandExitError, FileNotFoundError, FileType, Sandbox } from "e2b";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningComputerServer, startComputerServer } from "../../src/computer/server.js";
import { EventType, Filesystem } from "../../src/computer/transports/envd/gen/filesystem/filesystem_pb.js";
import { Process } from "../../src/computer/transports/envd/gen/process/process_pb.js";
import { startCli } from "../support/cli-process.js";

const ENVD_VERSION = "0.6.4";

/** The SDK's Sandbox on an envd URL, as the control plane would hand it over. */
function sandboxAt(url: string, envdAccessToken?: string): Sandbox {
  const SandboxClass = Sandbox as unknown as new (opts: Record<string, unknown>) => Sandbox;
  return new SandboxClass({
    sandboxId: "hangar-test",
    envdVersion: ENVD_VERSION,
    envdAccessToken,
    sandboxUrl: url,
    apiKey: "unused-by-envd",
  });
}

function clients(url: string, token?: string, binary = true) {
  const transport = createConnectTransport({
    baseUrl: url,
    httpVersion: "1.1",
    useBinaryFormat: binary,
    interceptors: token
      ? [
          (next) => (req) => {
            req.header.set("x-access-token", token);
            return next(req);
          },
        ]
      : [],
  });
  return { process: createClient(Process, transport), fs: createClient(Filesystem, transport) };
}

/** Resolves once `check` holds, checking after every call of the returned `poke`. */
function until(check: () => boolean) {
  let resolve!: () => void;
  const reached = new Promise<void>((r) => {
    resolve = r;
  });
  const poke = () => {
    if (check()) resolve();
  };
  return { reached, poke };
}

/** Processes of a process group that are not zombies, from /proc. */
function liveMembersOfGroup(pgid: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue;
    }
    // pid (comm) state ppid pgrp …: comm may hold spaces, so fields are read after its ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(pgrp) === pgid && state !== "Z") members.push(Number(name));
  }
  return members;
}

let dir: string;
let loginHome: string;
const machineHome = process.env.HOME;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "hangar-envd-"));
  // The SDK runs every command as `/bin/bash -l -c`: the login scripts of the machine's own home
  // are not under test (pyenv's rehash there waits up to a minute on a lock a killed shell left),
  // so the server's commands log in with a home that has none. Their cwd is still the account's.
  loginHome = mkdtempSync(join(tmpdir(), "hangar-envd-home-"));
  process.env.HOME = loginHome;
});
afterAll(() => {
  process.env.HOME = machineHome;
  rmSync(dir, { recursive: true, force: true });
  rmSync(loginHome, { recursive: true, force: true });
});

describe("envd without a token (loopback)", () => {
  let server: RunningComputerServer;
  let sbx: Sandbox;
  beforeAll(async () => {
    server = await startComputerServer({ port: 0, envd: { port: 0 } });
    sbx = sandboxAt(server.envdUrl!);
  });
  afterAll(() => server?.close());

  it("runs a command with stdout and stderr streamed to the callbacks, and reports its exit", async () => {
    const out: string[] = [];
    const err: string[] = [];
    const result = await sbx.commands.run("echo one; echo two >&2; printf 'é\\n'", {
      onStdout: (d) => void out.push(d),
      onStderr: (d) => void err.push(d),
    });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe("one\né\n");
    expect(result.stderr).toBe("two\n");
    expect(out.join("")).toBe("one\né\n");
    expect(err.join("")).toBe("two\n");

    const failed = await sbx.commands.run("echo partial; exit 3").catch((e) => e);
    expect(failed).toBeInstanceOf(CommandExitError);
    expect(failed.exitCode).toBe(3);
    expect(failed.error).toBe("exit status 3");
    expect(failed.stdout).toBe("partial\n");
  });

  it("runs in the home directory by default, in cwd when given, with the request's variables", async () => {
    const home = await sbx.commands.run("pwd");
    expect(home.stdout.trim()).toBe(userInfo().homedir);
    const there = await sbx.commands.run('pwd; echo "$GREETING"', {
      cwd: dir,
      envs: { GREETING: "it's me" },
    });
    expect(there.stdout).toBe(`${dir}\nit's me\n`);
    const missing = await sbx.commands.run("pwd", { cwd: join(dir, "nope") }).catch((e) => e);
    expect(String(missing.message)).toMatch(/cwd .* does not exist/);
  });

  it("attaches again to a background command and gets its whole output, the part before included", async () => {
    const handle = await sbx.commands.run('echo first; read line; echo "got $line"', {
      background: true,
      stdin: true,
    });
    const listed = await sbx.commands.list();
    const mine = listed.find((p) => p.pid === handle.pid);
    expect(mine?.cmd).toBe("/bin/bash");
    expect(mine?.args).toEqual(["-l", "-c", 'echo first; read line; echo "got $line"']);
    await handle.disconnect();

    const seen = until(() => again.stdout.includes("first"));
    const again = await sbx.commands.connect(handle.pid, { onStdout: () => seen.poke() });
    seen.poke();
    await seen.reached;
    await sbx.commands.sendStdin(handle.pid, "hello\n");
    const result = await again.wait();
    expect(result.stdout).toBe("first\ngot hello\n");
    expect((await sbx.commands.list()).some((p) => p.pid === handle.pid)).toBe(false);
  });

  it("closes stdin, kills with SIGKILL (the process group), and says false for a process that is gone", async () => {
    const cat = await sbx.commands.run("cat", { background: true, stdin: true });
    await cat.sendStdin("to cat\n");
    await cat.closeStdin();
    expect((await cat.wait()).stdout).toBe("to cat\n");

    const marker = join(dir, "child-alive");
    // Killed once the login shell has read its profile (a profile killed half-way may leave locks behind).
    let ready = "";
    const started = until(() => ready.includes("ready"));
    const sleeper = await sbx.commands.run(`(sleep 30; touch ${marker}) & echo ready; sleep 30`, {
      background: true,
      onStdout: (d) => {
        ready += d;
        started.poke();
      },
    });
    await started.reached;
    expect(await sbx.commands.kill(sleeper.pid)).toBe(true);
    const killed = await sleeper.wait().catch((e) => e);
    expect(killed).toBeInstanceOf(CommandExitError);
    expect(killed.exitCode).toBe(-1);
    expect(killed.error).toBe("signal: killed");
    expect(await sbx.commands.kill(sleeper.pid)).toBe(false);
    // The background child was in the group: nothing of the group is left to create the marker.
    expect(liveMembersOfGroup(sleeper.pid)).toEqual([]);
    expect(existsSync(marker)).toBe(false);
  });

  it("kills a command at its timeout, as envd does", async () => {
    const { process: proc } = clients(server.envdUrl!);
    let pid = 0;
    const timedOut = await (async () => {
      for await (const res of proc.start(
        { process: { cmd: "/bin/sh", args: ["-c", "sleep 20"] } },
        { timeoutMs: 500 },
      )) {
        if (res.event?.event.case === "start") pid = res.event.event.value.pid;
      }
    })().catch((e) => ConnectError.from(e).code);
    expect(timedOut).toBe(Code.DeadlineExceeded);
    expect(pid).toBeGreaterThan(0);
    const ended = proc.connect({ process: { selector: { case: "pid", value: pid } } });
    const events = [];
    for await (const res of ended) events.push(res.event?.event);
    expect(events.at(-1)).toMatchObject({ case: "end", value: { exitCode: -1, status: "signal: killed" } });
    expect((await sbx.commands.list()).some((p) => p.pid === pid)).toBe(false);
  });

  it("runs a terminal: input, output, resize", async () => {
    let text = "";
    const decoder = new TextDecoder();
    const watch = { check: (_: string) => false, poke: () => {} };
    const waitFor = (pattern: RegExp) => {
      const seen = until(() => pattern.test(text));
      watch.poke = seen.poke;
      seen.poke();
      return seen.reached;
    };
    const term = await sbx.pty.create({
      cols: 80,
      rows: 24,
      cwd: dir,
      envs: { PS1: "$ " },
      onData: (data) => {
        text += decoder.decode(data);
        watch.poke();
      },
    });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode("stty size; tty\n"));
    await waitFor(/24 80[\s\S]*\/dev\/pts\/\d+/);
    await sbx.pty.resize(term.pid, { cols: 100, rows: 30 });
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode("stty size\n"));
    await waitFor(/30 100/);
    await sbx.pty.sendInput(term.pid, new TextEncoder().encode("exit 7\n"));
    const ended = await term.wait().catch((e) => e);
    expect(ended.exitCode).toBe(7);
  });

  it("writes and reads files (multipart, octet-stream, gzip), lists to a depth, moves, stats, removes", async () => {
    const base = join(dir, "files");
    const info = await sbx.files.write(join(base, "a", "one.txt"), "first file");
    expect(info).toMatchObject({ name: "one.txt", path: join(base, "a", "one.txt"), type: "file" });
    expect(await sbx.files.read(join(base, "a", "one.txt"))).toBe("first file");
    await sbx.files.write(join(base, "a", "b", "two.bin"), new Uint8Array([0, 1, 2, 255]).buffer, {
      useOctetStream: true,
    });
    expect(readFileSync(join(base, "a", "b", "two.bin"))).toEqual(Buffer.from([0, 1, 2, 255]));
    await sbx.files.write(join(base, "zipped.txt"), "x".repeat(10_000), { gzip: true });
    expect(readFileSync(join(base, "zipped.txt"), "utf8")).toBe("x".repeat(10_000));
    const many = await sbx.files.write([
      { path: join(base, "m1.txt"), data: "m1" },
      { path: join(base, "m2.txt"), data: new Blob(["m2"]) },
    ]);
    expect(many.map((w) => w.name)).toEqual(["m1.txt", "m2.txt"]);
    expect(readFileSync(join(base, "m2.txt"), "utf8")).toBe("m2");
    // No temporary file is left beside the targets.
    expect(readdirSync(base).filter((n) => n.endsWith(".tmp"))).toEqual([]);

    const shallow = await sbx.files.list(base);
    expect(shallow.map((e) => e.name)).toEqual(["a", "m1.txt", "m2.txt", "zipped.txt"]);
    const deep = await sbx.files.list(base, { depth: 3 });
    expect(deep.map((e) => e.path.slice(base.length + 1))).toEqual([
      "a",
      "a/b",
      "a/b/two.bin",
      "a/one.txt",
      "m1.txt",
      "m2.txt",
      "zipped.txt",
    ]);
    const file = await sbx.files.getInfo(join(base, "a", "one.txt"));
    expect(file).toMatchObject({ type: FileType.FILE, size: 10, mode: 0o644, permissions: "-rw-r--r--" });
    expect(file.owner).toBe(userInfo().username);
    expect(file.modifiedTime?.getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect((await sbx.files.getInfo(join(base, "a"))).type).toBe(FileType.DIR);

    expect(await sbx.files.makeDir(join(base, "new", "deeper"))).toBe(true);
    expect(await sbx.files.makeDir(join(base, "new", "deeper"))).toBe(false);
    const moved = await sbx.files.rename(join(base, "m1.txt"), join(base, "new", "moved.txt"));
    expect(moved.path).toBe(join(base, "new", "moved.txt"));
    expect(await sbx.files.exists(join(base, "m1.txt"))).toBe(false);
    expect(await sbx.files.exists(join(base, "new", "moved.txt"))).toBe(true);
    await sbx.files.remove(join(base, "new"));
    expect(existsSync(join(base, "new"))).toBe(false);

    const missing = await sbx.files.read(join(base, "nope.txt")).catch((e) => e);
    expect(missing).toBeInstanceOf(FileNotFoundError);
    const statMissing = await sbx.files.getInfo(join(base, "nope.txt")).catch((e) => e);
    expect(statMissing).toBeInstanceOf(FileNotFoundError);
  });

  it("takes relative and ~ paths from the home directory", async () => {
    const name = `hangar-envd-test-${process.pid}.txt`;
    try {
      await sbx.files.write(name, "in home");
      expect(readFileSync(join(userInfo().homedir, name), "utf8")).toBe("in home");
      expect(await sbx.files.read(`~/${name}`)).toBe("in home");
    } finally {
      rmSync(join(userInfo().homedir, name), { force: true });
    }
  });

  it("streams directory events to watchDir, and keeps them for a polling watcher", async () => {
    const watched = join(dir, "watched");
    await sbx.files.makeDir(watched);
    const events: { name: string; type: string }[] = [];
    const seen = until(() => events.some((e) => e.name === "gone.txt" && e.type === "remove"));
    const handle = await sbx.files.watchDir(
      watched,
      (event) => {
        events.push({ name: event.name, type: event.type });
        seen.poke();
      },
      { recursive: true },
    );
    const { fs } = clients(server.envdUrl!);
    const { watcherId } = await fs.createWatcher({ path: watched, recursive: false });
    await sbx.files.write(join(watched, "made.txt"), "made");
    await sbx.files.makeDir(join(watched, "sub"));
    await sbx.files.write(join(watched, "sub", "inner.txt"), "inner");
    writeFileSync(join(watched, "gone.txt"), "short-lived");
    rmSync(join(watched, "gone.txt"));
    await seen.reached;
    await handle.stop();
    expect(events).toContainEqual({ name: "made.txt", type: "create" });
    expect(events).toContainEqual({ name: "sub", type: "create" });
    expect(events).toContainEqual({ name: join("sub", "inner.txt"), type: "create" });
    expect(events).toContainEqual({ name: "gone.txt", type: "remove" });
    // The atomic writes' temporary files are not reported.
    expect(events.filter((e) => e.name.endsWith(".tmp"))).toEqual([]);

    // The polling watcher has its own inotify watch: its last event may come a moment after the
    // stream's. Polled until it holds them, then a poll gives nothing more.
    const polled: [string, EventType][] = [];
    await expect
      .poll(async () => {
        polled.push(
          ...(await fs.getWatcherEvents({ watcherId })).events.map(
            (e) => [e.name, e.type] as [string, EventType],
          ),
        );
        return polled;
      })
      .toEqual(
        expect.arrayContaining([
          ["made.txt", EventType.CREATE],
          ["gone.txt", EventType.REMOVE],
        ]),
      );
    // Polled events are handed out once: a later poll holds nothing new. The short-lived file may
    // be told removed twice (its creation's event is described once it is already gone, CI saw it).
    const later = (await fs.getWatcherEvents({ watcherId })).events.map((e) => [e.name, e.type]);
    expect(later.filter(([name, type]) => !(name === "gone.txt" && type === EventType.REMOVE))).toEqual([]);
    await fs.removeWatcher({ watcherId });
    const gone = await fs.getWatcherEvents({ watcherId }).catch((e) => e);
    expect(ConnectError.from(gone).code).toBe(Code.NotFound);
  });

  it("speaks protobuf too: StreamInput in order, and envd's error codes for bad input", async () => {
    const { process: proc, fs } = clients(server.envdUrl!);
    const started = proc.start({ process: { cmd: "/bin/cat", args: [] }, stdin: true });
    const iterator = started[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.value.event.event.case).toBe("start");
    const pid = first.value.event.event.value.pid as number;
    async function* input() {
      yield {
        event: {
          case: "start" as const,
          value: { process: { selector: { case: "pid" as const, value: pid } } },
        },
      };
      for (const word of ["a", "b", "c"]) {
        yield {
          event: {
            case: "data" as const,
            value: { input: { input: { case: "stdin" as const, value: new TextEncoder().encode(word) } } },
          },
        };
      }
    }
    await proc.streamInput(input());
    await proc.closeStdin({ process: { selector: { case: "pid", value: pid } } });
    let out = "";
    let end: unknown;
    for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
      const event = next.value.event!.event;
      if (event.case === "data" && event.value.output.case === "stdout")
        out += Buffer.from(event.value.output.value);
      if (event.case === "end") end = event.value;
    }
    expect(out).toBe("abc");
    expect(end).toMatchObject({ exitCode: 0, exited: true, status: "exit status 0" });

    const code = async (p: Promise<unknown> | AsyncIterable<unknown>) => {
      try {
        if (Symbol.asyncIterator in (p as object)) for await (const _ of p as AsyncIterable<unknown>);
        else await p;
      } catch (err) {
        return ConnectError.from(err).code;
      }
      return "ok";
    };
    expect(await code(proc.start({ process: { cmd: "" } }))).toBe(Code.InvalidArgument);
    expect(await code(proc.start({ process: { cmd: "true" }, pty: { size: { cols: 0, rows: 10 } } }))).toBe(
      Code.InvalidArgument,
    );
    expect(await code(proc.connect({ process: { selector: { case: "pid", value: 2 ** 31 } } }))).toBe(
      Code.NotFound,
    );
    expect(
      await code(proc.sendSignal({ process: { selector: { case: "tag", value: "no-such-tag" } } })),
    ).toBe(Code.NotFound);
    expect(await code(proc.start({ process: { cmd: "echo", args: ["a\0b"] } }))).toBe(Code.InvalidArgument);
    expect(await code(proc.start({ process: { cmd: "env", envs: { "A=B": "x" } } }))).toBe(
      Code.InvalidArgument,
    );
    expect(await code(fs.listDir({ path: join(dir, "nope") }))).toBe(Code.NotFound);
    writeFileSync(join(dir, "plain.txt"), "x");
    expect(await code(fs.listDir({ path: join(dir, "plain.txt") }))).toBe(Code.InvalidArgument);
    expect(await code(fs.makeDir({ path: join(dir, "plain.txt") }))).toBe(Code.InvalidArgument);
    expect(await code(fs.makeDir({ path: dir }))).toBe(Code.AlreadyExists);
    expect(await code(fs.move({ source: join(dir, "nope"), destination: join(dir, "x") }))).toBe(
      Code.NotFound,
    );
    expect(await code(fs.stat({ path: "bad\0path" }))).toBe(Code.InvalidArgument);
    expect(await code(fs.watchDir({ path: join(dir, "plain.txt") }))).toBe(Code.InvalidArgument);
  });

  it("answers clients made from the service descriptors the e2b SDK ships (protobuf on the wire)", async () => {
    // The SDK's bundle embeds its generated files; its services are rebuilt from them here.
    const bundle = readFileSync(createRequire(import.meta.url).resolve("e2b"), "utf8");
    const embedded = (name: string) => {
      for (const match of bundle.matchAll(/fileDesc\)?\(\s*["']([A-Za-z0-9+/=]+)["']/g)) {
        if (Buffer.from(match[1], "base64").toString("latin1").includes(name)) return match[1];
      }
      throw new Error(`${name} is not in the SDK's bundle`);
    };
    const sdkProcess = fileDesc(embedded("process/process.proto")).services[0];
    const sdkFilesystem = fileDesc(embedded("filesystem/filesystem.proto"), [file_google_protobuf_timestamp])
      .services[0];
    const transport = createConnectTransport({
      baseUrl: server.envdUrl!,
      httpVersion: "1.1",
      useBinaryFormat: true,
    });
    const proc = createClient(sdkProcess, transport) as any;
    const fs = createClient(sdkFilesystem, transport) as any;
    let out = "";
    for await (const res of proc.start({
      process: { cmd: "/bin/echo", args: ["from", "the", "SDK's", "descriptors"] },
    })) {
      const event = res.event?.event;
      if (event?.case === "data") out += Buffer.from(event.value.output.value);
    }
    expect(out).toBe("from the SDK's descriptors\n");
    writeFileSync(join(dir, "through-sdk-descriptors.txt"), "12345");
    const listed = await fs.listDir({ path: dir, depth: 1 });
    const entry = listed.entries.find((e: { name: string }) => e.name === "through-sdk-descriptors.txt");
    expect(entry).toMatchObject({ size: 5n, path: join(dir, "through-sdk-descriptors.txt") });
  });

  it("refuses a user other than the server's, and answers clearly", async () => {
    const asRoot = await sbx.commands.run("id", { user: "root" }).catch((e) => e);
    if (userInfo().username !== "root") {
      expect(String(asRoot.message)).toMatch(/user 'root' is not available/);
    } else {
      expect(asRoot.exitCode).toBe(0);
    }
    const other = await sbx.files.read(join(dir, "plain.txt"), { user: "nobody-such" }).catch((e) => e);
    expect(other).toBeInstanceOf(AuthenticationError);
    expect(String(other.message)).toMatch(/user 'nobody-such' is not available/);
  });

  it("replays what a cut stream may have lost when the client attaches again", async () => {
    const { process: proc } = clients(server.envdUrl!);
    const script = "for i in $(seq 1 40); do echo line-$i; sleep 0.02; done";
    const cut = new AbortController();
    let before = "";
    let pid = 0;
    try {
      for await (const res of proc.start(
        { process: { cmd: "/bin/sh", args: ["-c", script] } },
        { signal: cut.signal },
      )) {
        const event = res.event?.event;
        if (event?.case === "start") pid = event.value.pid;
        if (event?.case === "data" && event.value.output.case === "stdout") {
          before += Buffer.from(event.value.output.value);
          if (before.includes("line-5\n")) cut.abort();
        }
      }
    } catch (err) {
      expect(ConnectError.from(err).code).toBe(Code.Canceled);
    }
    let after = "";
    for await (const res of proc.connect({ process: { selector: { case: "pid", value: pid } } })) {
      const event = res.event?.event;
      if (event?.case === "data" && event.value.output.case === "stdout")
        after += Buffer.from(event.value.output.value);
    }
    const expected = Array.from({ length: 40 }, (_, i) => `line-${i + 1}\n`).join("");
    expect(after).toBe(expected);
    expect(expected.startsWith(before)).toBe(true);
  });

  it("refuses pages of other origins and foreign Host names", async () => {
    const foreignOrigin = await fetch(`${server.envdUrl}/process.Process/List`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: "https://evil.example" },
      body: "{}",
    });
    expect(foreignOrigin.status).toBe(403);
    expect(await foreignOrigin.json()).toMatchObject({ code: 403, message: expect.stringMatching(/Origin/) });
    const { request } = await import("node:http");
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${server.envdUrl}/health`,
        { headers: { host: "rebound.example:49983" } },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
        },
      );
      req.on("error", reject);
      req.end();
    });
    expect(status).toBe(403);
    expect((await fetch(`${server.envdUrl}/health`)).status).toBe(204);
  });
});

describe("envd with an access token", () => {
  const token = `tok-${createHash("sha256").update(String(Math.random())).digest("hex")}`;
  let server: RunningComputerServer;

  beforeAll(async () => {
    server = await startComputerServer({ port: 0, envd: { port: 0, token } });
  });
  afterAll(() => server?.close());

  it("refuses calls without the token, and serves them with it", async () => {
    const anonymous = sandboxAt(server.envdUrl!);
    const refused = await anonymous.commands.run("true").catch((e) => e);
    expect(refused).toBeInstanceOf(AuthenticationError);
    expect(await anonymous.files.read("/etc/hostname").catch((e) => e)).toBeInstanceOf(AuthenticationError);
    const wrong = sandboxAt(server.envdUrl!, `${token}x`);
    expect(await wrong.files.list("/").catch((e) => e)).toBeInstanceOf(AuthenticationError);
    expect((await fetch(`${server.envdUrl}/envs`)).status).toBe(401);
    // The health check needs no token.
    expect((await fetch(`${server.envdUrl}/health`)).status).toBe(204);

    const sbx = sandboxAt(server.envdUrl!, token);
    expect((await sbx.commands.run("echo ok")).stdout).toBe("ok\n");
  });

  it("serves files through URLs signed with the token, and refuses a forged or expired one", async () => {
    const sbx = sandboxAt(server.envdUrl!, token);
    const path = join(dir, "signed.txt");
    const upload = await sbx.uploadUrl(path);
    const form = new FormData();
    form.append("file", new Blob(["through a signed URL"]), "signed.txt");
    expect((await fetch(upload, { method: "POST", body: form })).status).toBe(200);
    const download = await sbx.downloadUrl(path, { useSignatureExpiration: 60 });
    expect(await (await fetch(download)).text()).toBe("through a signed URL");
    const forged = new URL(download);
    forged.searchParams.set("signature", "v1_forged");
    expect((await fetch(forged)).status).toBe(401);
    const expired = new URL(download);
    expired.searchParams.set("signature_expiration", "1000");
    expect((await fetch(expired)).status).toBe(401);
  });

  it("takes /init's variables only with the token, and gives them to processes and /envs", async () => {
    const init = (body: unknown) =>
      fetch(`${server.envdUrl}/init`, { method: "POST", body: JSON.stringify(body) }).then((r) => r.status);
    expect(await init({ envVars: { FROM_INIT: "no" } })).toBe(401);
    expect(await init({ envVars: { FROM_INIT: "no" }, accessToken: "guess" })).toBe(401);
    expect(await init({ envVars: { "BAD NAME": "x" }, accessToken: token })).toBe(400);
    expect(await init({ envVars: { FROM_INIT: "yes" }, accessToken: token, defaultWorkdir: dir })).toBe(204);
    const sbx = sandboxAt(server.envdUrl!, token);
    const run = await sbx.commands.run('echo "$FROM_INIT"; pwd');
    expect(run.stdout).toBe(`yes\n${dir}\n`);
    const envs = await fetch(`${server.envdUrl}/envs`, { headers: { "x-access-token": token } });
    expect(await envs.json()).toEqual({ FROM_INIT: "yes" });
  });
});

describe("envd given its token by /init, with a small body limit", () => {
  let server: RunningComputerServer;
  beforeAll(async () => {
    server = await startComputerServer({ port: 0, bodyLimitBytes: 1024 * 1024, envd: { port: 0 } });
  });
  afterAll(() => server?.close());

  it("takes the first /init's token, then asks for it", async () => {
    const init = await fetch(`${server.envdUrl}/init`, {
      method: "POST",
      body: JSON.stringify({
        accessToken: "from-init",
        timestamp: new Date().toISOString(),
        hyperloopIP: "x",
      }),
    });
    expect(init.status).toBe(204);
    expect((await fetch(`${server.envdUrl}/envs`)).status).toBe(401);
    expect(
      (await fetch(`${server.envdUrl}/envs`, { headers: { "x-access-token": "from-init" } })).status,
    ).toBe(200);
    const again = await fetch(`${server.envdUrl}/init`, {
      method: "POST",
      body: JSON.stringify({ envVars: {} }),
    });
    expect(again.status).toBe(401);
    const bad = await fetch(`${server.envdUrl}/init`, { method: "POST", body: "{not json" });
    expect(bad.status).toBe(400);
  });

  it("refuses an upload beyond the body limit and leaves nothing behind", async () => {
    const sbx = sandboxAt(server.envdUrl!, "from-init");
    const target = join(dir, "limited", "too-big.bin");
    const declared = await sbx.files.write(target, new Blob([Buffer.alloc(2 * 1024 * 1024)])).catch((e) => e);
    expect(String(declared.message)).toMatch(/413.*larger than the limit of 1 MiB/);
    let sent = 0;
    const unsized = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 4 * 1024 * 1024) return controller.close();
        sent += 64 * 1024;
        controller.enqueue(new Uint8Array(64 * 1024));
      },
    });
    const streamed = await sbx.files.write(target, unsized).catch((e) => e);
    expect(streamed).toBeInstanceOf(Error);
    // Small when compressed, beyond the limit once inflated; and bytes that are not gzip.
    const { gzipSync } = await import("node:zlib");
    const post = (body: Buffer) =>
      fetch(`${server.envdUrl}/files?path=${encodeURIComponent(target)}`, {
        method: "POST",
        headers: {
          "content-type": "application/octet-stream",
          "content-encoding": "gzip",
          "x-access-token": "from-init",
        },
        body: new Uint8Array(body),
      });
    const bomb = await post(gzipSync(Buffer.alloc(8 * 1024 * 1024)));
    expect(bomb.status).toBe(413);
    const garbage = await post(Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]));
    expect(garbage.status).toBe(400);
    expect((await garbage.json()).message).toMatch(/cannot be decompressed/);
    expect(existsSync(target)).toBe(false);
    expect(readdirSync(join(dir, "limited"))).toEqual([]);
  });
});

describe("envd's start", () => {
  it("is refused beyond loopback without a token file, before anything listens", async () => {
    await expect(startComputerServer({ port: 0, host: "0.0.0.0", envd: { port: 0 } })).rejects.toThrow(
      /needs --envd-token-file/,
    );
  });

  it("takes its token from a file that not everyone can read", async () => {
    const { readTokenFile } = await import("../../src/computer/transports/envd/envd-token.js");
    const file = join(dir, "token");
    writeFileSync(file, "secret-token\n", { mode: 0o600 });
    expect(readTokenFile(file)).toBe("secret-token");
    chmodSync(file, 0o644);
    expect(() => readTokenFile(file)).toThrow(/every user/);
    writeFileSync(join(dir, "empty-token"), "\n", { mode: 0o600 });
    expect(() => readTokenFile(join(dir, "empty-token"))).toThrow(/first line/);
  });
});

describe("envd of `hangar serve --envd-port`", () => {
  // 200 MB (the issue asks for 50): garbage buffers not yet collected alone can reach 64 MB of a
  // Node process's memory, so only a file well beyond that shows whether a transfer is held whole.
  it("streams 200 MB up and down (raw and multipart) without holding them in memory", async () => {
    const token = "cli-token-0123456789";
    const tokenFile = join(dir, "cli-token");
    writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
    const cli = await startCli([
      "serve",
      "--port",
      "0",
      "--no-virtual-display",
      "--warm-shells",
      "0",
      "--body-limit",
      "256MiB",
      "--envd-port",
      "0",
      "--envd-token-file",
      tokenFile,
    ]);
    try {
      const envdLine = /E2B envd on (http:\/\/\S+)/;
      if (!envdLine.test(cli.stdout())) await new Promise((r) => cli.child.stdout!.once("data", r));
      const url = envdLine.exec(cli.stdout())![1];
      const sbx = sandboxAt(url, token);
      const peakRss = () =>
        Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${cli.pid}/status`, "utf8"))![1]) * 1024;
      await sbx.files.write(join(dir, "warm-up.txt"), "warm up");
      const before = peakRss();

      const size = 200 * 1024 * 1024;
      const chunk = Buffer.alloc(1024 * 1024);
      for (let i = 0; i < chunk.length; i++) chunk[i] = (i * 31) & 0xff;
      const sent = createHash("sha256");
      let left = size;
      const source = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (left === 0) return controller.close();
          left -= chunk.length;
          sent.update(chunk);
          controller.enqueue(new Uint8Array(chunk));
        },
      });
      const big = join(dir, "big.bin");
      await sbx.files.write(big, source);
      const digest = sent.digest("hex");
      expect(createHash("sha256").update(readFileSync(big)).digest("hex")).toBe(digest);

      const received = createHash("sha256");
      let length = 0;
      for await (const part of await sbx.files.read(big, { format: "stream" })) {
        received.update(part);
        length += part.length;
      }
      expect(length).toBe(size);
      expect(received.digest("hex")).toBe(digest);

      // The SDK's default upload: multipart (the SDK holds the Blob; the server streams it to disk).
      await sbx.files.write(join(dir, "big-multipart.bin"), new Blob([readFileSync(big)]));
      expect(
        createHash("sha256")
          .update(readFileSync(join(dir, "big-multipart.bin")))
          .digest("hex"),
      ).toBe(digest);

      const grown = peakRss() - before;
      expect(grown).toBeLessThan(100 * 1024 * 1024);
    } finally {
      await cli.stop();
    }
  }, 120_000);
});
