/**
 * Start of the computer server, interleaved A/B: the time from spawning `hangar serve
 * --no-virtual-display` (as `node bin/hangar.js`, which may start the server as its child: see
 * src/cli/launcher.ts) to `/status` answering, and the server's resident memory (VmRSS from /proc,
 * as an operator reads it) 2 s after that. Starts alternate between this checkout's build and another's
 * (`--against DIR`, a checkout with `bin/hangar.js` and its `dist/`), so that the machine's load,
 * which drifts, weighs on both alike. Without `--against` only this build is measured.
 *
 * Run: node --import tsx bench/start.ts [--against DIR] [--starts N] [--env NAME=VALUE]
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { commandPid } from "../test/support/cli-process.js";
import { machineLoad, median, p95, printTable, type Row } from "./lib.js";
import { freePort } from "./support.js";

const arg = (name: string) => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};
const STARTS = Number(arg("--starts")) || 10;
const against = arg("--against");
const builds: [label: string, bin: string][] = [
  ["this build", join(import.meta.dirname, "..", "bin", "hangar.js")],
];
if (against) builds.push([`--against ${against}`, join(resolve(against), "bin", "hangar.js")]);

const env: NodeJS.ProcessEnv = { ...process.env };
for (const name of ["NODE_OPTIONS", "LD_PRELOAD", "MALLOC_CONF", "HANGAR_PRELOADED_ALLOCATOR"])
  delete env[name];
// `--env NAME=VALUE` (repeatable), e.g. HANGAR_ALLOCATOR=system: one process, without the launcher.
process.argv.forEach((value, i) => {
  if (process.argv[i - 1] !== "--env") return;
  const at = value.indexOf("=");
  env[value.slice(0, at)] = value.slice(at + 1);
});

const rssMb = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;

/** CPU time (user + system) a process has used, in ms (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** One GET /status on a fresh connection: true when it answered 200. */
const statusOk = (port: number) =>
  new Promise<boolean>((done) => {
    const req = request({ host: "127.0.0.1", port, path: "/status", agent: false }, (res) => {
      res.resume();
      done(res.statusCode === 200);
    });
    req.on("error", () => done(false));
    req.end();
  });

async function startOnce(bin: string) {
  const port = await freePort();
  const started = performance.now();
  const child: ChildProcess = spawn(
    process.execPath,
    [bin, "serve", "--port", String(port), "--no-virtual-display"],
    { env, stdio: "ignore" },
  );
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${bin} exited with ${child.exitCode}`);
      if (await statusOk(port)) break;
      await sleep(2);
    }
    const startMs = performance.now() - started;
    // Less bent by the load than the wall-clock time: the CPU the start took, launcher included.
    const server = commandPid(child.pid!);
    const cpu = cpuMs(child.pid!) + (server === child.pid ? 0 : cpuMs(server));
    await sleep(2000);
    return { startMs, cpu, rss: rssMb(server) };
  } finally {
    if (child.exitCode === null) {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
  }
}

const loadBefore = machineLoad();
const times = builds.map(() => [] as number[]);
const cpus = builds.map(() => [] as number[]);
const rss = builds.map(() => [] as number[]);
for (let i = 0; i < STARTS; i++) {
  // Each build goes first in every other round.
  const order = i % 2 === 0 ? builds.map((_, k) => k) : builds.map((_, k) => k).reverse();
  for (const k of order) {
    const s = await startOnce(builds[k][1]);
    times[k].push(s.startMs);
    cpus[k].push(s.cpu);
    rss[k].push(s.rss);
  }
}
const rows: Row[] = builds.flatMap(([label], k) => [
  {
    name: `process start → /status answers (no display), ${label}`,
    median: `${median(times[k]).toFixed(0)} ms`,
    p95: `${p95(times[k]).toFixed(0)} ms`,
    target: "≤ 300 ms",
  },
  {
    name: `CPU time of that start (user + system, launcher included), ${label}`,
    median: `${median(cpus[k]).toFixed(0)} ms`,
    p95: `${p95(cpus[k]).toFixed(0)} ms`,
  },
  {
    name: `RSS 2 s after /status (no display), ${label}`,
    median: `${median(rss[k]).toFixed(1)} MB`,
    p95: `${p95(rss[k]).toFixed(1)} MB`,
    target: "≤ 60 MB",
  },
]);
console.log(
  `before: ${loadBefore}${env.HANGAR_ALLOCATOR ? `; HANGAR_ALLOCATOR=${env.HANGAR_ALLOCATOR}` : ""}`,
);
printTable(`Start of hangar serve, ${STARTS} interleaved starts each (bench/start.ts)`, rows);
