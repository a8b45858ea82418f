/**
 * A real container engine for the tests: podman's Docker-compatible API service, started here on
 * a socket in a temporary directory with storage of its own, and stopped (its containers removed)
 * by `cleanup()`. The project's image is not copied: the image cache that scripts/test-image.sh
 * builds into (/var/cache/hangar-image, or $HANGAR_IMAGE_CACHE; the global set-up builds it when it
 * is missing, test/support/project-image.ts) is this storage's read-only additional image store, so
 * the image is there at once.
 *
 * This machine lets no container raise its limits: the desktops get nofile and nproc at most
 * 10,000 (and never above this process's own hard limits), through the API.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { Ulimit } from "../../src/host/container/container-runtime.js";
import { withParentDeathSignal } from "../../src/os/parent-death.js";
import { imageStore, TEST_IMAGE } from "../support/project-image.js";

const run = promisify(execFile);

export { TEST_IMAGE };

export interface TestEngine {
  root: string;
  socket: string;
  /** `unix://<socket>`, as --container-engine takes it. */
  address: string;
  env: NodeJS.ProcessEnv;
  /** The podman command line on the same storage (`podman kill`, `podman ps`). */
  podman(...args: string[]): Promise<string>;
  /** Stops the API service (the socket goes away; containers keep running). */
  stop(): Promise<void>;
  /** Starts it again on the same socket. */
  start(): Promise<void>;
  cleanup(): Promise<void>;
}

/** The limits this machine allows a container: nofile and nproc at most 10,000 (its hard limits below that). */
export function testUlimits(): Ulimit[] {
  const limits = readFileSync("/proc/self/limits", "utf8");
  const hard = (label: string) => {
    const value = new RegExp(`^${label}\\s+\\S+\\s+(\\S+)`, "m").exec(limits)?.[1];
    return value === undefined || value === "unlimited" ? Number.POSITIVE_INFINITY : Number(value);
  };
  const nofile = Math.min(10_000, hard("Max open files"));
  const nproc = Math.min(10_000, hard("Max processes"));
  return [
    { name: "nofile", soft: nofile, hard: nofile },
    { name: "nproc", soft: nproc, hard: nproc },
  ];
}

export async function startPodman(): Promise<TestEngine> {
  const store = imageStore();
  const root = mkdtempSync(join(tmpdir(), "hangar-podman-"));
  const conf = join(root, "storage.conf");
  writeFileSync(
    conf,
    [
      "[storage]",
      `driver = "${store.driver}"`,
      `graphroot = "${join(root, "storage")}"`,
      `runroot = "${join(root, "run")}"`,
      "[storage.options]",
      `additionalimagestores = ["${store.path}"]`,
      "",
    ].join("\n"),
  );
  const socket = join(root, "podman.sock");
  // podman makes and at once removes a temporary file in $TMPDIR for many of its API calls
  // (dozens a second while a pool test runs); one killed between the two would leave it in the
  // run's directory. Here it is under the engine's root, which cleanup() removes.
  const scratch = join(root, "tmp");
  mkdirSync(scratch);
  const env = { ...process.env, CONTAINERS_STORAGE_CONF: conf, TMPDIR: scratch };
  let service: ChildProcess | undefined;

  const podman = async (...args: string[]) =>
    (await run("podman", args, { env, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 })).stdout;

  const engine: TestEngine = {
    root,
    socket,
    address: `unix://${socket}`,
    env,
    podman,
    async start() {
      // runc, not crun: crun fails on this machine's hybrid cgroup hierarchy.
      service = spawn(
        ...withParentDeathSignal(
          "podman",
          ["--runtime", "runc", "system", "service", "--time=0", `unix://${socket}`],
          "TERM",
        ),
        { env, stdio: ["ignore", "ignore", "pipe"], detached: true },
      );
      let stderr = "";
      service.stderr?.setEncoding("utf8").on("data", (c: string) => {
        stderr = (stderr + c).slice(-2000);
      });
      const deadline = Date.now() + 30_000;
      while (!(await answers(socket))) {
        if (service.exitCode !== null) throw new Error(`podman system service exited: ${stderr}`);
        if (Date.now() > deadline)
          throw new Error(`podman system service did not answer on ${socket}: ${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      const child = service;
      service = undefined;
      if (!child?.pid || child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      process.kill(-child.pid, "SIGTERM");
      const timer = setTimeout(() => child.pid && process.kill(-child.pid, "SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
      await rm(socket, { force: true });
    },
    async cleanup() {
      // A paused (hibernated) container is not removed until it runs again, and its storage would
      // stay mounted under the root removed below.
      await podman("unpause", "--all").catch(() => undefined);
      await podman("rm", "--all", "--force", "--time", "0").catch(() => undefined);
      await podman("umount", "--all", "--force").catch(() => undefined);
      await podman("volume", "prune", "--force").catch(() => undefined);
      await engine.stop();
      // containers/storage binds its overlay directory onto itself and leaves that mount when
      // podman ends; a directory still mounted cannot be removed.
      for (const mount of mountsUnder(root)) await run("umount", ["--lazy", mount]).catch(() => undefined);
      await rm(root, { recursive: true, force: true });
    },
  };
  await engine.start();
  const images = await podman("images", "--format", "{{.Repository}}:{{.Tag}}");
  if (!images.split("\n").includes(TEST_IMAGE)) {
    await engine.cleanup();
    throw new Error(
      `podman does not see ${TEST_IMAGE} in the image store at ${store.path}: build it again with sudo ./scripts/test-image.sh`,
    );
  }
  return engine;
}

/** The mount points at or below `dir`, deepest first (from /proc/self/mounts, octal escapes undone). */
function mountsUnder(dir: string): string[] {
  return readFileSync("/proc/self/mounts", "utf8")
    .split("\n")
    .map((line) =>
      (line.split(" ")[1] ?? "").replace(/\\([0-7]{3})/g, (_, o) =>
        String.fromCharCode(Number.parseInt(o, 8)),
      ),
    )
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

/** True when the engine's API answers `GET /_ping` on the socket. */
async function answers(socket: string): Promise<boolean> {
  const { request } = await import("node:http");
  return new Promise((resolve) => {
    const req = request({ socketPath: socket, path: "/_ping", timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("error", () => resolve(false));
    req.on("timeout", () => {
      req.destroy();
      resolve(false);
    });
    req.end();
  });
}

/**
 * A light image for tests that make many containers: the project's image with, as its entry
 * point, a tiny server that answers `/status` and every `/cmd` (what a pool looks for), so that
 * a container starts in a fraction of a second. Made in the engine by a commit.
 */
export async function makeLightImage(
  engine: TestEngine,
  tag = "localhost/hangar-light:test",
): Promise<string> {
  const script =
    "require('http').createServer((q,s)=>{s.writeHead(200,{'content-type':q.url==='/cmd'?'text/event-stream':'application/json'});" +
    "s.end(q.url==='/cmd'?'data: {\"success\":true}\\n\\n':'{\"status\":\"ok\"}')}).listen(8000,'0.0.0.0')";
  const name = `light-${process.pid}-${Date.now()}`;
  await engine.podman("create", "--name", name, TEST_IMAGE);
  await engine.podman(
    "commit",
    "--change",
    `ENTRYPOINT ["node", "-e", ${JSON.stringify(script)}, "--"]`,
    "--change",
    "CMD []",
    name,
    tag,
  );
  await engine.podman("rm", name);
  return tag;
}
