/**
 * The host service under concurrency and crashes: several clients send randomized create, clone,
 * set, run, stop, delete, push and pull requests over a handful of names while the service is
 * `kill -9`ed at random points and restarted. After every step the invariants are checked:
 * every request answered within its bound, `GET /svc/vms` lists only complete VMs, every
 * config.json parses, no lock is left held (a locking request on every name answers), and after a
 * restart no temporary or push work directory is left and every running QEMU is tracked.
 *
 * Bounded to about a minute; the seed is fixed (HANGAR_CRASH_SEED overrides it) and printed with
 * every failure, so a failing sequence can be replayed.
 */
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it, vi } from "vitest";
import { processRunning } from "../../src/os/pid.js";
import { startRegistry, type TestRegistry } from "../support/registry.js";
import { boundedRequest, killProcess, killQemusUnder, spawnServiceProcess } from "./support.js";

const SEED = Number(process.env.HANGAR_CRASH_SEED ?? 1313);
const BUDGET_MS = 30_000;
const CLIENTS = 3;
const NAMES = ["n0", "n1", "n2", "n3", "n4"];
const VM = { os: "linux", cpu: 1, memory: "128MB", diskSize: "64MB", display: "640x480" };
/** How long each kind of request may take before it counts as a hang. */
const BOUND_MS: Record<string, number> = {
  run: 10_000,
  stop: 15_000,
  delete: 15_000,
  pull: 20_000,
  push: 10_000,
};
const DEFAULT_BOUND_MS = 8000;

/** mulberry32: a small seeded generator, the same sequence for the same seed. */
function generator(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, pick: <T>(list: T[]): T => list[Math.floor(next() * list.length)] };
}

const random = generator(SEED);
const root = mkdtempSync(join(tmpdir(), "hangar-crash-"));
const home = join(root, "home");
let registry: TestRegistry;
let service: ChildProcess | undefined;
let url = "";
const figures = { steps: 0, operations: 0, kills: 0, restarts: 0, invariantChecks: 0 };
const outcomes = new Map<string, number>();
const history: string[] = [];

function fail(message: string): never {
  throw new Error(
    `${message}\n(seed ${SEED}; replay with HANGAR_CRASH_SEED=${SEED})\nlast steps:\n${history.slice(-12).join("\n")}`,
  );
}

async function startService() {
  const started = await spawnServiceProcess(root);
  service = started.child;
  url = started.url;
}

async function killService() {
  await killProcess(service);
}

const request = (method: string, path: string, body?: unknown, bound = DEFAULT_BOUND_MS) =>
  boundedRequest(url, method, path, body, bound);

/** One random operation; its outcome is counted by kind and status. */
async function operation(killing: boolean) {
  const name = random.pick(NAMES);
  const other = random.pick(NAMES);
  const kinds: [string, string, string, unknown?][] = [
    ["create", "POST", "/svc/vms", { name, ...VM }],
    ["clone", "POST", "/svc/vms/clone", { name, newName: other }],
    ["set", "PATCH", `/svc/vms/${name}`, random.next() < 0.5 ? { cpu: 2 } : { diskSize: "128MB" }],
    ["run", "POST", `/svc/vms/${name}/run`, { noDisplay: random.next() < 0.5 }],
    ["stop", "POST", `/svc/vms/${name}/stop`, {}],
    ["delete", "DELETE", `/svc/vms/${name}`],
    [
      "push",
      "POST",
      "/svc/vms/push",
      {
        name,
        imageName: "crash",
        tags: ["t"],
        registry: registry.host,
        organization: "hangar",
        chunkSizeMb: 16,
      },
    ],
    [
      "pull",
      "POST",
      "/svc/pull",
      { image: "base:v1", name, registry: registry.host, organization: "hangar" },
    ],
  ];
  const [kind, method, path, body] = random.pick(kinds);
  history.push(`${kind} ${method} ${path} ${body === undefined ? "" : JSON.stringify(body)}`);
  figures.operations++;
  const bound = BOUND_MS[kind] ?? DEFAULT_BOUND_MS;
  try {
    const res = await request(method, path, body, bound);
    if (res.status >= 500) fail(`${kind} ${path} answered ${res.status}: ${JSON.stringify(res.body)}`);
    count(`${kind} ${res.status}`);
  } catch (err) {
    const aborted = (err as Error).name === "TimeoutError";
    if (aborted && !killing) fail(`${kind} ${path} did not answer within ${bound} ms`);
    if (!killing) throw err;
    count(`${kind} cut by kill`);
  }
}

function count(key: string) {
  outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
}

const REQUIRED = ["config.json", "disk.img", "nvram.bin"];

/** The QEMU processes whose command line names a VM under this test's home: pid → VM name. */
function qemusUnderHome(): Map<number, string> {
  const found = new Map<number, string>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = (() => {
      try {
        return readFileSync(`/proc/${entry}/cmdline`, "utf8");
      } catch {
        return "";
      }
    })();
    const match = cmdline.includes("hangar-vm")
      ? new RegExp(`${home}/([^/,\\0]+)/disk\\.img`).exec(cmdline)
      : null;
    if (match && processRunning(Number(entry))) found.set(Number(entry), match[1]);
  }
  return found;
}

async function checkInvariants(afterRestart: boolean) {
  figures.invariantChecks++;
  const list = await request("GET", "/svc/vms");
  if (list.status !== 200) fail(`GET /svc/vms answered ${list.status}`);
  for (const vm of list.body as { name: string; status: string; vncUrl: string | null }[]) {
    if (vm.name.startsWith(".")) fail(`a hidden directory is listed: ${vm.name}`);
    const missing = REQUIRED.filter((file) => !existsSync(join(home, vm.name, file)));
    if (missing.length > 0) fail(`${vm.name} is listed without ${missing.join(", ")}`);
  }
  for (const entry of readdirSync(home)) {
    const config = join(home, entry, "config.json");
    if (entry.startsWith(".") || !existsSync(config)) continue;
    try {
      JSON.parse(readFileSync(config, "utf8"));
    } catch {
      fail(`${config} does not parse`);
    }
  }
  // A request that takes the VM's lock: it answers, whatever it answers.
  await Promise.all(
    NAMES.map((name) =>
      request("PATCH", `/svc/vms/${name}`, {}).catch(() =>
        fail(`PATCH ${name} did not answer: a lock is held`),
      ),
    ),
  );
  if (afterRestart) {
    const leftovers = readdirSync(home).filter((e) => e.startsWith(".hangar-tmp-"));
    if (leftovers.length > 0) fail(`temporary directories survived the restart: ${leftovers.join(", ")}`);
    for (const entry of readdirSync(home)) {
      if (existsSync(join(home, entry, ".hangar-push"))) fail(`${entry}/.hangar-push survived the restart`);
    }
  }
  // Every running QEMU is tracked: its VM reads running (with VNC when it has it), or the QEMU ends.
  for (const [pid, name] of qemusUnderHome()) {
    let vm: any;
    await vi
      .waitFor(
        async () => {
          vm = (await request("GET", `/svc/vms/${name}`)).body;
          const session = (() => {
            try {
              return JSON.parse(readFileSync(join(home, name, "session.json"), "utf8"));
            } catch {
              return undefined;
            }
          })();
          const tracked = vm?.status === "running" && (!session?.vnc || vm.vncUrl !== null);
          expect(tracked || !processRunning(pid)).toBe(true);
        },
        { timeout: 10_000, interval: 200 },
      )
      .catch(() => fail(`QEMU ${pid} of ${name} runs but ${name} reads ${JSON.stringify(vm)}`));
  }
}

beforeAll(async () => {
  registry = await startRegistry();
  await startService();
  // The image every pull fetches: a blank VM pushed once.
  expect((await request("POST", "/svc/vms", { name: "base", ...VM })).status).toBe(200);
  const push = {
    name: "base",
    imageName: "base",
    tags: ["v1"],
    registry: registry.host,
    organization: "hangar",
  };
  expect((await request("POST", "/svc/vms/push", push)).status).toBe(202);
  const deadline = Date.now() + 20_000;
  while ((await request("GET", "/svc/vms/base")).body.push?.status !== "pushed") {
    if (Date.now() > deadline) throw new Error("the base image was not pushed");
    await new Promise((r) => setTimeout(r, 100));
  }
  expect((await request("DELETE", "/svc/vms/base")).status).toBe(200);
});

afterAll(async () => {
  await killService();
  await killQemusUnder(root);
  await registry?.stop();
  rmSync(root, { recursive: true, force: true });
});

it(`keeps its invariants under concurrent clients and kill -9 (seed ${SEED})`, {
  timeout: 90_000,
}, async () => {
  const started = Date.now();
  while (Date.now() - started < BUDGET_MS) {
    figures.steps++;
    const killing = random.next() < 0.2;
    history.push(`-- step ${figures.steps}${killing ? " (kill -9)" : ""}`);
    const ops = Array.from({ length: CLIENTS }, () => operation(killing));
    if (killing) {
      await new Promise((r) => setTimeout(r, Math.floor(random.next() * 400)));
      await killService();
      figures.kills++;
      await Promise.allSettled(ops);
      await startService();
      figures.restarts++;
    } else {
      await Promise.all(ops);
    }
    await checkInvariants(killing);
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  const byOutcome = [...outcomes].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${k}: ${n}`);
  console.log(
    `host crash suite (seed ${SEED}): ${figures.steps} steps, ${figures.operations} operations, ${figures.kills} kills, ` +
      `${figures.restarts} restarts, ${figures.invariantChecks} invariant checks in ${seconds} s\n  ${byOutcome.join("\n  ")}`,
  );
  expect(figures.kills).toBeGreaterThan(0);
});
