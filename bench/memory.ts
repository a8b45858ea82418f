/**
 * The computer server's memory, read from outside (/proc/<pid>/status VmRSS) as an operator would,
 * with the server started the ways users start it, side by side and driven alike:
 *
 * - `hangar serve` as the npm bin runs it (`npx hangar serve`, or `hangar serve` after `npm link`):
 *   the file `bin/hangar.js` executed through its `#!` line, which runs the server in a child with
 *   the memory settings (cli/launcher.ts): the server's RSS is the child's, and the launcher's own
 *   memory (what is private to it, from smaps_rollup) is given beside it;
 * - the same with `HANGAR_ALLOCATOR=system`: one process, the C library's allocator and Node's
 *   defaults, as every start was before the launcher;
 * - with the settings of the systemd unit and the container (memoryEnv: jemalloc, V8's young
 *   generation), as `node bin/hangar.js serve`;
 * - `hangar mcp` as a desktop agent starts it (the npm bin, an MCP client over stdio), driven
 *   through MCP tool calls.
 *
 * Beside them, the floor: a bare Node HTTP server and a Hono app on its Node adapter, idle.
 *
 * One server at a time, each with a virtual display of 1280x800: RSS 2 s after /status answers,
 * right after a burst (screenshots of a changing screen, 1 MiB writes and reads, `version`), and
 * 60 s later. Then the time from spawning the process to /status answering (no display), median
 * and p95 over several starts, the ways taking turns.
 *
 * Run: node --import tsx bench/memory.ts [--starts N]
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { memoryEnv } from "../src/common/memory-env.js";
import { commandPid } from "../test/support/cli-process.js";
import { burst, type Call } from "./burst.js";
import { closeClient, post } from "./client.js";
import { median, p95, printTable, type Row } from "./lib.js";
import { freePort } from "./support.js";

const BIN = join(import.meta.dirname, "..", "bin", "hangar.js");
const STARTS = Number(process.argv[process.argv.indexOf("--starts") + 1]) || 10;

interface Way {
  name: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
}

const plainEnv = () => {
  const env = { ...process.env };
  for (const name of ["NODE_OPTIONS", "LD_PRELOAD", "MALLOC_CONF", "HANGAR_PRELOADED_ALLOCATOR"])
    delete env[name];
  return env;
};
const WAYS: Way[] = [
  {
    name: "`hangar serve` (the npm bin, as npx and npm link run it)",
    command: BIN,
    args: [],
    env: plainEnv(),
  },
  {
    name: "`hangar serve` with HANGAR_ALLOCATOR=system (one process, no settings)",
    command: BIN,
    args: [],
    env: { ...plainEnv(), HANGAR_ALLOCATOR: "system" },
  },
  {
    name: "with the systemd unit's and the container's settings",
    command: process.execPath,
    args: [BIN],
    env: { ...plainEnv(), ...memoryEnv(plainEnv()) },
  },
];

const rssMb = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;

/** Memory only this process holds (private pages, from smaps_rollup), in MB. */
function privateMb(pid: number): number {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(rollup)?.[1] ?? 0);
  return (kb("Private_Clean") + kb("Private_Dirty")) / 1024;
}

async function waitForStatus(url: string, child: ChildProcess) {
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/status`)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(2);
  }
}

async function start(way: Way, display: boolean) {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(
    way.command,
    [
      ...way.args,
      "serve",
      "--port",
      String(port),
      display ? "--virtual-display=1280x800" : "--no-virtual-display",
    ],
    { env: { ...way.env, ...(display ? { DISPLAY: "" } : {}) }, stdio: "ignore" },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitForStatus(url, child);
  return { child, url, startMs: performance.now() - started };
}

async function stop(child: ChildProcess) {
  if (child.exitCode !== null) return;
  child.kill("SIGTERM");
  await once(child, "exit");
}

/** `hangar mcp` as a desktop agent starts it (the npm bin, over stdio), through the same burst. */
async function mcpRow(dir: string): Promise<Row> {
  const client = new Client({ name: "bench-memory", version: "1" });
  const transport = new StdioClientTransport({
    command: BIN,
    args: ["mcp"],
    env: { ...(plainEnv() as Record<string, string>), DISPLAY: "" },
    stderr: "ignore",
  });
  await client.connect(transport);
  try {
    const call: Call = (name, params = {}) => client.callTool({ name, arguments: params });
    await call("version");
    await sleep(2000);
    const pid = commandPid(transport.pid!);
    const idle = rssMb(pid);
    await burst(call, join(dir, "burst.bin"));
    const after = rssMb(pid);
    await sleep(60_000);
    const later = rssMb(pid);
    const launcher =
      pid === transport.pid ? "" : ` (+ launcher ${privateMb(transport.pid!).toFixed(1)} MB private)`;
    return {
      name: "RSS, `hangar mcp` (the npm bin, over stdio): idle / right after a burst / 60 s later",
      median: `${idle.toFixed(1)} / ${after.toFixed(1)} / ${later.toFixed(1)} MB${launcher}`,
      p95: "",
      target: "≤ 60 / — / ≤ 80 MB",
    };
  } finally {
    await client.close();
  }
}

/**
 * The floor under the server's figure: Node itself answering HTTP, and a Hono app on its Node
 * adapter (what `hangar serve` is built on), each one process with Node's defaults, RSS 2 s after
 * it listens.
 */
const FLOORS = [
  {
    name: "a bare Node HTTP server",
    source: "require('node:http').createServer((q, r) => r.end('ok')).listen(0, () => console.log('up'));",
  },
  {
    name: "a Hono app on @hono/node-server",
    source:
      "const { Hono } = require('hono'); const { serve } = require('@hono/node-server');" +
      "const app = new Hono(); app.get('/status', (c) => c.json({ ok: true }));" +
      "serve({ fetch: app.fetch, port: 0 }, () => console.log('up'));",
  },
];

async function floorRow(floor: (typeof FLOORS)[number]): Promise<Row> {
  const child = spawn(process.execPath, ["-e", floor.source], {
    env: plainEnv(),
    cwd: join(import.meta.dirname, ".."),
    stdio: ["ignore", "pipe", "inherit"],
  });
  try {
    // It says `up` once it listens; a child that cannot start (or exits) ends the wait with why.
    await Promise.race([
      once(child.stdout!, "data"),
      once(child, "exit").then(([code]) => {
        throw new Error(`${floor.name} exited with ${code} before listening`);
      }),
    ]);
    await sleep(2000);
    return {
      name: `RSS, the floor: ${floor.name}, idle`,
      median: `${rssMb(child.pid!).toFixed(1)} MB`,
      p95: "",
      target: "",
    };
  } finally {
    await stop(child);
  }
}

const dir = mkdtempSync(join(tmpdir(), "hangar-bench-memory-"));
const rows: Row[] = [];
try {
  for (const way of WAYS) {
    const server = await start(way, true);
    await sleep(2000);
    const pid = commandPid(server.child.pid!);
    const idle = rssMb(pid);
    await burst((command, params) => post(server.url, command, params), join(dir, "burst.bin"));
    const after = rssMb(pid);
    await sleep(60_000);
    const later = rssMb(pid);
    const launcher =
      pid === server.child.pid ? "" : ` (+ launcher ${privateMb(server.child.pid!).toFixed(1)} MB private)`;
    await stop(server.child);
    rows.push({
      name: `RSS, ${way.name}: idle / right after a burst / 60 s later`,
      median: `${idle.toFixed(1)} / ${after.toFixed(1)} / ${later.toFixed(1)} MB${launcher}`,
      p95: "",
      target: "≤ 60 / — / ≤ 80 MB",
    });
  }
  rows.push(await mcpRow(dir));
  for (const floor of FLOORS) rows.push(await floorRow(floor));
  // Interleaved, so that every way sees the same machine.
  const times = WAYS.map(() => [] as number[]);
  for (let i = 0; i < STARTS; i++) {
    for (const [index, way] of WAYS.entries()) {
      const s = await start(way, false);
      times[index].push(s.startMs);
      await stop(s.child);
    }
  }
  for (const [index, way] of WAYS.entries()) {
    rows.push({
      name: `process start → /status answers, ${way.name}`,
      median: `${median(times[index]).toFixed(0)} ms`,
      p95: `${p95(times[index]).toFixed(0)} ms`,
      target: "≤ 300 ms",
    });
  }
} finally {
  closeClient();
  rmSync(dir, { recursive: true, force: true });
}
printTable("The computer server's memory and start, as users start it (bench/memory.ts)", rows);
