/**
 * `/cmd` `version` throughput as a share of a bare Node HTTP server that sends the same bytes (the
 * same status, headers and event), both under autocannon with 32 connections. Rounds alternate
 * between the servers (the bare one first in even rounds), so that the machine's load, which drifts,
 * weighs on both alike; the share is taken round by round. On a loaded machine a round's throughput
 * depends on how much of a core each process got, so the CPU time each server used per request (from
 * /proc) is measured too: the bare server's CPU time per request over a server's is the share that
 * server would have with a core of its own. A minimal Hono app on the same adapter, answering the same
 * bytes, is measured beside them (what Hono itself costs). Other builds (a directory with `bin/hangar.js`, e.g. a
 * copy of main's build) can be measured in the same rounds, started the same way.
 *
 * Run after `npm run build`: node --import tsx bench/cmd-share.ts [rounds] [build directory…]
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import autocannon from "autocannon";
import { median, printTable, type Row } from "./lib.js";
import { freePort, spawnHangar } from "./support.js";

const [roundsArg, ...others] = process.argv.slice(2);
const ROUNDS = Number(roundsArg ?? 6);
const SECONDS = 3;
const body = JSON.stringify({ command: "version" });

const serveArgs = ["serve", "--no-virtual-display"];
const hangar = await spawnHangar(serveArgs);
const builds = await Promise.all(
  others.map((dir) => spawnHangar(serveArgs, {}, { bin: join(dir, "bin/hangar.js") })),
);
// The bare server answers with the bytes hangar sends, taken from hangar itself.
const reply = await fetch(`${hangar.url}/cmd`, { method: "POST", body });
const event = await reply.text();
const headers = Object.fromEntries(
  ["content-type", "cache-control", "x-accel-buffering"].map((name) => [name, reply.headers.get(name) ?? ""]),
);
const barePort = await freePort();
const bare = spawn(
  process.execPath,
  [
    "-e",
    `const http = require("node:http");
     const headers = ${JSON.stringify(headers)};
     const event = Buffer.from(${JSON.stringify(event)});
     http.createServer((req, res) => {
       req.resume();
       req.on("end", () => { res.writeHead(200, headers); res.end(event); });
     }).listen(${barePort}, "127.0.0.1", () => console.log("ready"));`,
  ],
  { stdio: ["ignore", "pipe", "inherit"] },
);
await once(bare.stdout, "data");
// A minimal Hono app on the same adapter as hangar's, answering with the same bytes: what Hono costs.
const honoPort = await freePort();
const hono = spawn(
  process.execPath,
  [
    "--input-type=module",
    "-e",
    `import { serve } from "@hono/node-server";
     import { Hono } from "hono";
     const headers = ${JSON.stringify(headers)};
     const event = ${JSON.stringify(event)};
     const app = new Hono();
     app.post("/cmd", async (c) => { await c.req.arrayBuffer(); return c.body(event, 200, headers); });
     serve({ fetch: app.fetch, port: ${honoPort}, hostname: "127.0.0.1" }, () => console.log("ready"));`,
  ],
  { stdio: ["ignore", "pipe", "inherit"] },
);
await once(hono.stdout, "data");

const servers: [name: string, url: string, pid: number | undefined][] = [
  ["bare Node server", `http://127.0.0.1:${barePort}`, bare.pid],
  ["minimal Hono app", `http://127.0.0.1:${honoPort}`, hono.pid],
  ["hangar serve", hangar.url, hangar.child.pid],
  ...builds.map((build, i): [string, string, number | undefined] => [
    `hangar serve of ${others[i]}`,
    build.url,
    build.child.pid,
  ]),
];
const rates = new Map<string, number[]>(servers.map(([name]) => [name, []]));
const shares = new Map<string, number[]>(servers.slice(1).map(([name]) => [name, []]));
/** CPU time used in the rounds and requests served, per server. */
const cpu = new Map<string, { ticks: number; requests: number }>(
  servers.map(([name]) => [name, { ticks: 0, requests: 0 }]),
);
/**
 * User and system CPU time of a process and of the processes it started (a launcher may run the
 * server in a child), in clock ticks.
 */
const cpuTicks = (pid: number | undefined): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  let ticks = Number(fields[11]) + Number(fields[12]);
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    const children = readFileSync(`/proc/${pid}/task/${task}/children`, "utf8").split(" ").filter(Boolean);
    for (const child of children) ticks += cpuTicks(Number(child));
  }
  return ticks;
};
try {
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? servers : [...servers].reverse();
    const thisRound = new Map<string, number>();
    for (const [name, url, pid] of order) {
      const ticks = cpuTicks(pid);
      const result = await autocannon({
        url: `${url}/cmd`,
        method: "POST",
        body,
        connections: 32,
        duration: SECONDS,
      });
      if (result.non2xx || result.errors)
        throw new Error(`${name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
      const used = cpu.get(name);
      if (used) {
        used.ticks += cpuTicks(pid) - ticks;
        used.requests += result.requests.total;
      }
      thisRound.set(name, result.requests.average);
      rates.get(name)?.push(result.requests.average);
    }
    const bareRate = thisRound.get(servers[0][0]) ?? 1;
    for (const [name, share] of shares) share.push((thisRound.get(name) ?? 0) / bareRate);
  }
} finally {
  bare.kill();
  hono.kill();
  await Promise.all([hangar, ...builds].map((server) => server.stop()));
}

/** Microseconds of CPU time per request. */
const cpuPerRequest = (name: string) => {
  const used = cpu.get(name) ?? { ticks: 0, requests: 1 };
  return (1e6 * used.ticks) / 100 / used.requests;
};
const bareCpu = cpuPerRequest(servers[0][0]);
const rows: Row[] = servers.map(([name]) => {
  const share = shares.get(name);
  const perRequest = cpuPerRequest(name);
  return {
    name: `${name}: version over /cmd, 32 connections`,
    median: `${Math.round(median(rates.get(name) ?? []))} req/s`,
    p95: `${perRequest.toFixed(0)} µs CPU/request${share ? ` (${((100 * bareCpu) / perRequest).toFixed(1)} % of the bare server's rate)` : ""}`,
    target: share ? "≥ 50 % of the bare server" : "",
    note: share
      ? `${(100 * median(share)).toFixed(1)} % of the bare server (median of ${ROUNDS} rounds; ${share
          .map((x) => (100 * x).toFixed(0))
          .join(", ")} %)`
      : "",
  };
});
printTable(`/cmd throughput beside a bare Node server (${ROUNDS} interleaved rounds of ${SECONDS} s)`, rows);
