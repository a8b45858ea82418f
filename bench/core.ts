/**
 * Core benchmark (issue 2): `version` latency and throughput, `run_command echo hi`, 100 MiB through
 * write_bytes/read_bytes in 1 MiB chunks, and the idle memory of `hangar serve`.
 * Run after `npm run build`: node --import tsx bench/core.ts
 */

import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import autocannon from "autocannon";
import WebSocket from "ws";
import { closeClient, timedPost } from "./client.js";
import { median, printTable, type Row, sample, summarize, summarizeRates, timeIt } from "./lib.js";
import { cmd, getFile, putFile, rssWhileIdle, spawnHangar } from "./support.js";

// A body limit that lets the /files uploads below through.
const serveArgs = ["serve", "--body-limit", "1GiB"];
const server = await spawnHangar([...serveArgs, "--no-virtual-display"]).catch(() => spawnHangar(serveArgs));
const dir = mkdtempSync(join(tmpdir(), "hangar-bench-"));
const rows: Row[] = [];
try {
  await sleep(500);
  rows.push({
    name: "idle RSS of hangar serve",
    median: `${server.rssMb().toFixed(1)} MB`,
    p95: "",
    target: "≤ 80 MB",
  });

  rows.push(
    await timeIt("version over /cmd, one at a time", () => cmd(server.url, "version"), {
      runs: 500,
      target: "≤ 2 ms",
    }),
  );

  const load = await autocannon({
    url: `${server.url}/cmd`,
    method: "POST",
    body: JSON.stringify({ command: "version" }),
    connections: 32,
    duration: 5,
  });
  rows.push({
    name: "version over /cmd, 32 connections",
    median: `${Math.round(load.requests.average)} req/s`,
    p95: `${load.latency.p97_5} ms p97.5 latency`,
    target: "≥ 5,000 req/s",
    note: `${load.non2xx} non-2xx, ${load.errors} errors`,
  });

  rows.push(
    await timeIt(
      "run_command echo hi",
      async () => {
        const r = await cmd(server.url, "run_command", { command: "echo hi" });
        if (r.stdout !== "hi\n") throw new Error("wrong output");
      },
      { runs: 100, target: "≤ 10 ms" },
    ),
  );

  const chunk = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < chunk.length; i += 4) chunk.writeUInt32LE((i * 2654435761) >>> 0, i);
  const chunkB64 = chunk.toString("base64");
  const file = join(dir, "big.bin");
  const rounds = 3;
  const writeRates: number[] = [];
  const readRates: number[] = [];
  const parallelReadRates: number[] = [];
  const readChunk = async (i: number) => {
    const r = await cmd(server.url, "read_bytes", {
      path: file,
      offset: i * chunk.length,
      length: chunk.length,
    });
    if (r.content_b64.length !== chunkB64.length) throw new Error("short read");
  };
  for (let round = 0; round < rounds; round++) {
    let start = performance.now();
    for (let i = 0; i < 100; i++) {
      const r = await cmd(server.url, "write_bytes", { path: file, content_b64: chunkB64, append: i > 0 });
      if (!r.success) throw new Error(r.error);
    }
    writeRates.push((100 * 1.048576) / ((performance.now() - start) / 1000));
    start = performance.now();
    for (let i = 0; i < 100; i++) await readChunk(i);
    readRates.push((100 * 1.048576) / ((performance.now() - start) / 1000));
    start = performance.now();
    for (let i = 0; i < 100; i += 4) await Promise.all([0, 1, 2, 3].map((k) => readChunk(i + k)));
    parallelReadRates.push((100 * 1.048576) / ((performance.now() - start) / 1000));
  }
  rows.push({
    name: "100 MiB by 1 MiB write_bytes",
    ...summarizeRates(writeRates),
    target: "≥ 100 MB/s",
    note: `${rounds} rounds`,
  });
  rows.push({
    name: "100 MiB by 1 MiB read_bytes",
    ...summarizeRates(readRates),
    target: "≥ 100 MB/s",
    note: `${rounds} rounds`,
  });
  // As a client sending a chunk again: the body encoded once (not timed), the reply parsed after the
  // clock has stopped, whole-file writes and reads; the server's time more than the client's.
  for (const [name, command, params] of [
    [
      "1 MiB write_bytes replacing a file, body encoded once",
      "write_bytes",
      { path: join(dir, "replaced.bin"), content_b64: chunkB64 },
    ],
    [
      "1 MiB read_bytes, reply parsed after the clock",
      "read_bytes",
      { path: file, offset: 0, length: chunk.length },
    ],
  ] as const) {
    const call = timedPost(server.url, command, params);
    const samples = await sample(rounds * 100, call.run);
    call.check();
    const perSecond = 1.048576 / (median(samples) / 1000);
    rows.push({
      name,
      ...summarize(samples),
      note: `${rounds} × 100; ${perSecond.toFixed(0)} MB/s at the median`,
    });
  }
  rows.push({
    name: "100 MiB by 1 MiB read_bytes, 4 in flight",
    ...summarizeRates(parallelReadRates),
    target: "≥ 100 MB/s",
    note: `${rounds} rounds`,
  });
  // The same reads over /ws, the transport of cua's TypeScript client (its replies carry no copy).
  const ws = new WebSocket(`${server.url.replace(/^http/, "ws")}/ws`, { maxPayload: 64 * 1024 * 1024 });
  await once(ws, "open");
  const wsRates: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const start = performance.now();
    for (let i = 0; i < 100; i++) {
      const reply = new Promise<Record<string, string>>((resolve) =>
        ws.once("message", (data) => resolve(JSON.parse(String(data)))),
      );
      ws.send(
        JSON.stringify({
          command: "read_bytes",
          params: { path: file, offset: i * chunk.length, length: chunk.length },
        }),
      );
      if ((await reply).content_b64.length !== chunkB64.length) throw new Error("short read over /ws");
    }
    wsRates.push((100 * 1.048576) / ((performance.now() - start) / 1000));
  }
  ws.close();
  rows.push({
    name: "100 MiB by 1 MiB read_bytes over /ws",
    ...summarizeRates(wsRates),
    note: `${rounds} rounds`,
  });
  // Raw bytes through GET and PUT /files/<path> (no base64, no JSON): 256 MiB at a time.
  const rawFile = join(dir, "raw.bin");
  const rawSize = 256 * chunk.length;
  const putRates: number[] = [];
  const getRates: number[] = [];
  for (let round = 0; round < rounds; round++) {
    let start = performance.now();
    await putFile(`${server.url}/files${rawFile}`, chunk, 256);
    putRates.push(rawSize / 1e6 / ((performance.now() - start) / 1000));
    start = performance.now();
    if ((await getFile(`${server.url}/files${rawFile}`)) !== rawSize) throw new Error("short download");
    getRates.push(rawSize / 1e6 / ((performance.now() - start) / 1000));
  }
  rows.push({
    name: "256 MiB by PUT /files (streamed, fsync, rename)",
    ...summarizeRates(putRates),
    target: "≥ 1,000 MB/s",
    note: `${rounds} rounds; bounded here by writing into memory the VM has not used before (README)`,
  });
  rows.push({
    name: "256 MiB by GET /files",
    ...summarizeRates(getRates),
    target: "≥ 1,000 MB/s",
    note: `${rounds} rounds`,
  });
  rows.push({
    name: "RSS after the file transfers",
    median: `${server.rssMb().toFixed(1)} MB`,
    p95: "",
    target: "≤ 130 MB",
  });
  rows.push({
    name: "RSS once idle",
    median: await rssWhileIdle(server),
    p95: "",
    target: "≤ 100 MB by 60 s",
  });

  // The same reads from a server started with --no-spread: what the envelope's spread copy costs.
  const seedOnly = await spawnHangar(["serve", "--no-spread"]);
  try {
    const rates: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const start = performance.now();
      for (let i = 0; i < 100; i++) {
        const r = await cmd(seedOnly.url, "read_bytes", {
          path: file,
          offset: i * chunk.length,
          length: chunk.length,
        });
        if (r.content.content_b64.length !== chunkB64.length) throw new Error("short read");
      }
      rates.push((100 * 1.048576) / ((performance.now() - start) / 1000));
    }
    rows.push({
      name: "100 MiB by 1 MiB read_bytes, --no-spread",
      ...summarizeRates(rates),
      note: "seed shape: content only",
    });
  } finally {
    await seedOnly.stop();
  }
} finally {
  closeClient();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}
printTable("Core: /cmd, shell and files (2 cores, loopback)", rows);
