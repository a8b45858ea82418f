/**
 * Soak: `hangar serve` (the built CLI, its own process) under a mix of commands for N minutes, with
 * the X server killed and started again and clients that go away mid-command, printing every minute
 * the server's RSS, file descriptors, shared-memory segments and the latency of the period.
 *
 *   npm run bench -- soak                       # 5 minutes
 *   HANGAR_SOAK_MINUTES=30 npm run bench -- soak
 *
 * What counts as an error: a transport failure, a 5xx, or a failed command other than `unavailable`
 * (the answer while the X server is down) and `cancelled` (the clients that leave on purpose).
 */
import { once } from "node:events";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import WebSocket from "ws";
import { freeDisplayNumber, killXvfb, startXvfb } from "../test/support/xvfb.js";
import { spawnHangar } from "./support.js";

const MINUTES = Number(process.env.HANGAR_SOAK_MINUTES ?? 5);
const REPORT_MS = Number(process.env.HANGAR_SOAK_REPORT_SECONDS ?? 60) * 1000;
/** The X server dies this often, and is back 2 s later. */
const X_DEATH_EVERY_MS = 20_000;
const CLIENTS = 4;

const display = freeDisplayNumber();
const dir = mkdtempSync(join(tmpdir(), "hangar-soak-"));
let xvfb = await startXvfb(display);
const server = await spawnHangar(["serve", "--no-virtual-display"], {
  DISPLAY: `:${display}`,
  HANGAR_LOG_LEVEL: "error",
});
const pid = server.child.pid!;
writeFileSync(join(dir, "f0"), "soak");

let latencies: number[] = [];
let requests = 0;
let errors = 0;
let deaths = 0;
const errorSamples = new Set<string>();

/** One `/cmd` request; `abortAfterMs` makes the client leave before the answer. */
async function cmd(command: string, params: unknown, abortAfterMs?: number) {
  const started = performance.now();
  const signal = abortAfterMs === undefined ? undefined : AbortSignal.timeout(abortAfterMs);
  try {
    const res = await fetch(`${server.url}/cmd`, {
      method: "POST",
      body: JSON.stringify({ command, params }),
      signal,
    });
    const text = await res.text();
    requests++;
    latencies.push(performance.now() - started);
    const event = JSON.parse(text.slice(text.lastIndexOf("data: ") + 6));
    if (res.status >= 500 || (!event.success && !["unavailable", "cancelled"].includes(event.code))) {
      fail(`${command}: ${res.status} ${event.code} ${event.error}`);
    }
  } catch (err) {
    if (signal?.aborted) return; // the client left on purpose
    requests++;
    fail(`${command}: ${(err as Error).message}`);
  }
}

function fail(what: string) {
  errors++;
  if (errorSamples.size < 5) errorSamples.add(what);
}

/** A `/ws` session of a few commands, then gone. */
async function wsSession() {
  const ws = new WebSocket(`${server.url.replace("http", "ws")}/ws`);
  ws.on("error", () => undefined);
  await once(ws, "open");
  for (const command of ["version", "get_screen_size", "file_exists"]) {
    const started = performance.now();
    ws.send(JSON.stringify({ command, params: { path: dir } }));
    const [data] = await once(ws, "message");
    requests++;
    latencies.push(performance.now() - started);
    const reply = JSON.parse(String(data));
    if (!reply.success && reply.code !== "unavailable") fail(`ws ${command}: ${reply.error}`);
  }
  ws.terminate();
}

const MIX: (() => Promise<unknown>)[] = [
  () => cmd("version", {}),
  () => cmd("screenshot", {}),
  () => cmd("get_cursor_position", {}),
  () => cmd("move_cursor", { x: Math.round(Math.random() * 600), y: Math.round(Math.random() * 400) }),
  () => cmd("type_text", { text: "soak" }),
  () => cmd("run_command", { command: "echo soak" }),
  () => cmd("run_command", { command: "sleep 10 & echo bg", timeout: 1 }),
  () => cmd("run_command", { command: "sleep 5" }, 100),
  () =>
    cmd("write_text", { path: join(dir, `f${Math.floor(Math.random() * 20)}`), content: "x".repeat(4096) }),
  () => cmd("read_text", { path: join(dir, "f0") }),
  () => cmd("list_dir", { path: dir }),
  () => cmd("read_bytes", { path: "/proc/self/status", length: 4096 }),
  () => wsSession(),
];

const end = Date.now() + MINUTES * 60_000;
const workers = Array.from({ length: CLIENTS }, async () => {
  while (Date.now() < end) await MIX[Math.floor(Math.random() * MIX.length)]();
});

const killer = (async () => {
  while (Date.now() + X_DEATH_EVERY_MS < end) {
    await sleep(X_DEATH_EVERY_MS);
    await killXvfb(xvfb, display);
    deaths++;
    await sleep(2000);
    xvfb = await startXvfb(display);
  }
})();

const rows: string[] = [];
const header =
  "| minutes | requests | errors | X deaths | RSS MB | fds | SHM segments | p50 ms | p99 ms |\n|---|---|---|---|---|---|---|---|---|";
console.log(`soak: ${MINUTES} min, ${CLIENTS} clients, X killed every ${X_DEATH_EVERY_MS / 1000} s`);
console.log(header);
const startFds = fdCount();
const began = Date.now();
while (Date.now() < end) {
  await sleep(Math.min(REPORT_MS, Math.max(0, end - Date.now())));
  const sorted = latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : 0;
  const minutes = ((Date.now() - began) / 60_000).toFixed(REPORT_MS % 60_000 === 0 ? 0 : 1);
  const row = `| ${minutes} | ${requests} | ${errors} | ${deaths} | ${(rss() / 1024 / 1024).toFixed(0)} | ${fdCount()} | ${shmSegments()} | ${at(0.5).toFixed(1)} | ${at(0.99).toFixed(1)} |`;
  rows.push(row);
  console.log(row);
  latencies = [];
}
await Promise.all([...workers, killer]);
console.log(
  `\nfds at start ${startFds}, at the end ${fdCount()}; server alive: ${server.child.exitCode === null}`,
);
if (errorSamples.size > 0) console.log(`errors, first few: ${[...errorSamples].join(" | ")}`);

await server.stop();
await killXvfb(xvfb, display);
rmSync(dir, { recursive: true, force: true });

function rss(): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]) * 1024;
}

function fdCount(): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** The server's descriptors into /dev/shm: MIT-SHM capture segments. */
function shmSegments(): number {
  return readdirSync(`/proc/${pid}/fd`).filter((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("/dev/shm/");
    } catch {
      return false;
    }
  }).length;
}
