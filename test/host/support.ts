/**
 * Starts a real host service on a free loopback port with its own temporary config directory and
 * home, and talks to it over HTTP. `cleanup()` kills every QEMU started under that home and
 * removes the directory.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { open, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ramPathIn } from "../../src/host/qemu/session.js";
import { type HostServiceOptions, type RunningHostService, startHostService } from "../../src/host/server.js";
import { withParentDeathSignal } from "../../src/os/parent-death.js";

export interface TestHost {
  root: string;
  home: string;
  url: string;
  options: HostServiceOptions;
  /** The running service (its E2B listener, its services), replaced by `restart()`. */
  readonly service: RunningHostService;
  api(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: any; text: string; headers: Headers }>;
  restart(): Promise<void>;
  close(): Promise<void>;
  cleanup(): Promise<void>;
}

/**
 * The loopback network of a test's host service, from its root directory: its own, so that test
 * files running at once never hand out the same VM address (a request meant for another file's VM
 * would wake or reach this one's).
 */
export function testLoopbackNetwork(root: string): string {
  const hash = createHash("sha256").update(root).digest();
  return `127.${16 + (hash[0] % 200)}.${hash[1]}`;
}

export async function startTestHost(extra: HostServiceOptions = {}): Promise<TestHost> {
  const root = mkdtempSync(join(tmpdir(), "hangar-host-test-"));
  const home = join(root, "home");
  const options: HostServiceOptions = {
    port: 0,
    loopbackNetwork: testLoopbackNetwork(root),
    configHome: join(root, "config"),
    userHome: root,
    defaultHomeDirectory: home,
    stopGraceMs: 500,
    ...extra,
  };
  // A service that refuses to start leaves nothing behind.
  let service = await startHostService(options).catch(async (err) => {
    await rm(root, { recursive: true, force: true });
    throw err;
  });
  const host: TestHost = {
    root,
    home,
    get url() {
      return service.url;
    },
    get service() {
      return service;
    },
    options,
    async api(method, path, body) {
      const res = await fetch(`${service.url}${path}`, {
        method,
        headers: body === undefined ? {} : { "content-type": "application/json" },
        body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
      });
      const text = await res.text();
      let parsed: any = null;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        parsed = text;
      }
      return { status: res.status, body: parsed, text, headers: res.headers };
    },
    async restart() {
      await service.close();
      service = await startHostService(options);
    },
    async close() {
      await service.close();
    },
    async cleanup() {
      await service.close().catch(() => undefined);
      await killQemusUnder(root);
      await rm(root, { recursive: true, force: true });
    },
  };
  return host;
}

/** Kills every QEMU whose pid file lies under `dir` (any depth up to 3). */
export async function killQemusUnder(dir: string, depth = 3): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory() && depth > 0) await killQemusUnder(path, depth - 1);
    if (entry.isFile() && entry.name === "qemu.pid") {
      const pid = Number((await readFile(path, "utf8").catch(() => "")).trim());
      if (pid > 0) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
      // Its RAM file in /dev/shm outlives it (the service removes it when it sees the QEMU gone).
      await rm(ramPathIn(dir, true), { force: true });
    }
  }
}

export const LINUX_VM = { os: "linux", cpu: 1, memory: "256MB", diskSize: "1GB", display: "800x600" };

/** Waits until the pool has `ready` desktops ready; its last start failure when none is starting. */
export async function poolReady(host: Pick<TestHost, "api">, name: string, ready: number) {
  for (;;) {
    const pool = (await host.api("GET", `/svc/pools/${name}`)).body;
    if (pool.ready >= ready) return;
    if (pool.lastError && pool.starting === 0) throw new Error(pool.lastError);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Polls `check` every 100 ms until it returns a truthy value or `ms` pass. */
export async function eventually<T>(check: () => Promise<T | undefined | false>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Writes `chunks` blocks of 64 MiB of non-zero data spread over the disk. */
export async function fillSparse(path: string, total: number, chunks: number) {
  const block = Buffer.alloc(64 * 1024 ** 2);
  for (let i = 0; i < block.length; i += 4096) block.writeUInt32LE(i + 1, i);
  const file = await open(path, "r+");
  try {
    const stride = Math.floor(total / chunks / 1024 ** 2) * 1024 ** 2;
    for (let i = 0; i < chunks; i++) await file.write(block, 0, block.length, i * stride);
  } finally {
    await file.close();
  }
}

/** A JSON request that must answer within `ms` (it is aborted then, so a hang fails fast). */
export async function boundedRequest(url: string, method: string, path: string, body: unknown, ms: number) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(ms),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : null) as any };
}

/**
 * Starts the host service of fixtures/serve.ts on `root` in a process of its own (so that a test can
 * kill it with SIGKILL); resolves with the process and the URL it printed once listening.
 */
export async function spawnServiceProcess(root: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    ...withParentDeathSignal(
      process.execPath,
      ["--import", "tsx", join(import.meta.dirname, "fixtures", "serve.ts"), root],
      "TERM",
    ),
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let err = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    err = (err + c).slice(-2000);
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout?.setEncoding("utf8").on("data", (c: string) => {
      out += c;
      if (out.includes("\n")) resolve(out.trim());
    });
    child.once("exit", (code) => reject(new Error(`the service exited (${code}): ${err}`)));
  });
  return { child, url };
}

/** Kills a process with SIGKILL and waits for it to be gone (nothing when it already is). */
export async function killProcess(child: ChildProcess | undefined) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGKILL");
  await exited;
}
