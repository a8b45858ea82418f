/**
 * Transport benchmark (issue 4): `version` over /cmd with TLS and keep-alive and over /ws (WSS),
 * what cloud-mode auth costs against local-mode throughput, raw file transfers (`PUT`/`GET /files`)
 * over cloud-mode TLS, and what the /cmd spread copy costs on a 1080p PNG screenshot result.
 * Run after `npm run build`: node --import tsx bench/transport.ts
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import autocannon from "autocannon";
import WebSocket from "ws";
import { Authenticator } from "../src/computer/auth/index.js";
import { ensureSelfSignedCertificate } from "../src/computer/tls.js";
import { printTable, type Row, summarizeRates, timeIt } from "./lib.js";
import { measureSpreadCopy } from "./spread.js";
import { freePort, getFile, putFile } from "./support.js";

const NAME = "bench-vm";
const KEY = "sk-bench-3c1f9a0e7d";
const dir = mkdtempSync(join(tmpdir(), "hangar-bench-transport-"));
const { certPath, keyPath } = await ensureSelfSignedCertificate({ dir });
const ca = readFileSync(certPath);
const keyFile = join(dir, "keys.txt");
writeFileSync(keyFile, `${KEY}\n`);
const cloudHeaders = { "x-container-name": NAME, "x-api-key": KEY };

interface Spawned {
  url: string;
  child: ChildProcess;
}

/** Starts the built CLI and waits until /status answers. */
async function start(args: string[]): Promise<Spawned> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    ["bin/hangar.js", "serve", "--no-virtual-display", "--port", String(port), ...args],
    {
      env: { ...process.env, HANGAR_LOG_LEVEL: "warn", HANGAR_API_KEYS: "" },
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  const url = `https://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    const up = await get(`${url}/status`).then(
      () => true,
      () => false,
    );
    if (up) return { url, child };
    await sleep(50);
  }
  throw new Error(`hangar serve ${args.join(" ")} did not start`);
}

async function stop(server: Spawned) {
  server.child.kill("SIGTERM");
  await once(server.child, "exit");
}

const agent = new Agent({ keepAlive: true, ca, maxSockets: 1 });

function get(url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ca }, (res) => {
      res.resume();
      res.on("end", () => resolve());
    });
    req.on("error", reject);
    req.end();
  });
}

/** POST /cmd over a kept-alive TLS connection; resolves with the parsed single event. */
function postCmd(url: string, headers: Record<string, string>): Promise<any> {
  const body = Buffer.from(JSON.stringify({ command: "version" }));
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/cmd`,
      {
        method: "POST",
        agent,
        headers: { ...headers, "content-type": "application/json", "content-length": body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve(JSON.parse(Buffer.concat(chunks).toString("utf8").slice(6))));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** Opens /ws (authenticating in cloud mode) and returns a request function. */
async function openWs(url: string, cloud: boolean) {
  const ws = new WebSocket(`${url.replace(/^http/, "ws")}/ws`, { ca });
  await once(ws, "open");
  const ask = (frame: unknown) =>
    new Promise<any>((resolve) => {
      ws.once("message", (data) => resolve(JSON.parse(String(data))));
      ws.send(JSON.stringify(frame));
    });
  if (cloud) {
    const auth = await ask({ command: "authenticate", params: { api_key: KEY, container_name: NAME } });
    if (!auth.success) throw new Error("authentication failed");
  }
  return { ask, close: () => ws.close() };
}

async function throughput(url: string, headers: Record<string, string>) {
  const result = await autocannon({
    url: `${url}/cmd`,
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ command: "version" }),
    connections: 16,
    duration: 2,
  });
  if (result.non2xx || result.errors) throw new Error(`${result.non2xx} non-2xx, ${result.errors} errors`);
  return result.requests.average;
}

/** 256 MiB up with `PUT /files` and down with `GET /files`, over HTTPS with the cloud key headers. */
async function cloudFileTransfers(url: string): Promise<Row[]> {
  const chunk = Buffer.alloc(1024 * 1024, 7);
  const size = 256 * chunk.length;
  const target = `${url}/files${join(dir, "raw.bin")}`;
  const options = { agent: new Agent({ keepAlive: true, ca, maxSockets: 1 }), headers: cloudHeaders };
  const up: number[] = [];
  const down: number[] = [];
  for (let round = 0; round < 3; round++) {
    let start = performance.now();
    await putFile(target, chunk, 256, options);
    up.push(size / 1e6 / ((performance.now() - start) / 1000));
    start = performance.now();
    if ((await getFile(target, options)) !== size) throw new Error("short download");
    down.push(size / 1e6 / ((performance.now() - start) / 1000));
  }
  options.agent.destroy();
  const row = (name: string, rates: number[]): Row => ({
    name,
    ...summarizeRates(rates),
    target: "≥ 300 MB/s",
    note: `3 rounds: ${rates.map(Math.round).join(", ")} MB/s`,
  });
  return [
    row("256 MiB by PUT /files, HTTPS, cloud mode (streamed, fsync, rename)", up),
    row("256 MiB by GET /files, HTTPS, cloud mode", down),
  ];
}

const rows: Row[] = [];
const tlsArgs = ["--tls-cert", certPath, "--tls-key", keyPath];
const local = await start(tlsArgs);
// Large enough for the 256 MiB uploads of `cloudFileTransfers`.
const cloud = await start([
  ...tlsArgs,
  "--container-name",
  NAME,
  "--api-key-file",
  keyFile,
  "--body-limit",
  "1GiB",
]);
try {
  for (const [mode, server, headers] of [
    ["local", local, {}],
    ["cloud", cloud, cloudHeaders],
  ] as const) {
    rows.push(
      await timeIt(`/cmd version, HTTPS keep-alive, ${mode} mode`, () => postCmd(server.url, headers), {
        runs: 1000,
        warmup: 50,
        target: "≤ 3 ms",
      }),
    );
    const ws = await openWs(server.url, mode === "cloud");
    rows.push(
      await timeIt(`/ws version, WSS, ${mode} mode`, () => ws.ask({ command: "version" }), {
        runs: 1000,
        warmup: 50,
        target: "≤ 3 ms",
      }),
    );
    ws.close();
  }
  rows.push(
    await timeIt(
      "WSS connect + authenticate + version (cloud)",
      async () => {
        const ws = await openWs(cloud.url, true);
        await ws.ask({ command: "version" });
        ws.close();
      },
      { runs: 100, warmup: 5 },
    ),
  );

  // Alternate the two modes so that load from other processes on the machine hits both alike.
  const localRates: number[] = [];
  const cloudRates: number[] = [];
  for (let round = 0; round < 5; round++) {
    localRates.push(await throughput(local.url, {}));
    cloudRates.push(await throughput(cloud.url, cloudHeaders));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const localRate = median(localRates);
  const cloudRate = median(cloudRates);
  const cost = ((localRate - cloudRate) / localRate) * 100;
  const all = (xs: number[]) => xs.map((x) => Math.round(x)).join(", ");
  rows.push({
    name: "/cmd version throughput, HTTPS, 16 connections, local",
    median: `${Math.round(localRate)} req/s`,
    p95: "",
    note: `rounds: ${all(localRates)}`,
  });
  rows.push({
    name: "/cmd version throughput, HTTPS, 16 connections, cloud",
    median: `${Math.round(cloudRate)} req/s`,
    p95: "",
    target: "auth ≤ 15% of local",
    note: `auth costs ${cost.toFixed(1)}%; rounds: ${all(cloudRates)}`,
  });
  rows.push(...(await cloudFileTransfers(cloud.url)));
  const authenticator = new Authenticator({ containerName: NAME, keys: [KEY], limiter: {} });
  const checks = 1000;
  const perCheck = await timeIt(
    "one cloud auth check (digest + constant-time compare), in process",
    async () => {
      for (let i = 0; i < checks; i++)
        await authenticator.check({ containerName: NAME, apiKey: KEY }, "127.0.0.1");
    },
    { runs: 20 },
  );
  const perCheckUs = (row: string) => `${((Number.parseFloat(row) * 1000) / checks).toFixed(2)} µs`;
  rows.push({ ...perCheck, median: perCheckUs(perCheck.median), p95: perCheckUs(perCheck.p95) });
} finally {
  await stop(local);
  await stop(cloud);
}
printTable("Transports (TLS on loopback, client and server in separate processes)", rows);
printTable("The /cmd spread copy on a 1080p PNG screenshot result", await measureSpreadCopy());
rmSync(dir, { recursive: true, force: true });
