/**
 * An interleaved A/B of two running computer servers over `/cmd`: `version` (the transport's and the
 * registry's own cost), `screenshot` (PNG and JPEG of the same screen) and `read_bytes` of 1 MiB
 * chunks (of a file this benchmark writes; both servers run on this machine). Rounds alternate between
 * A and B, so that the machine's load, which drifts, weighs on both alike. Start the two servers
 * first (e.g. the branch's and main's `hangar serve --port N`, each with its own virtual display).
 *
 * Run: node --import tsx bench/ab.ts http://127.0.0.1:A http://127.0.0.1:B [rounds]
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closeClient, timedPost } from "./client.js";
import { printTable, type Row, sample, summarize } from "./lib.js";

const [a, b, roundsArg] = process.argv.slice(2);
if (!a || !b) {
  console.error("usage: bench/ab.ts URL_A URL_B [rounds]");
  process.exit(2);
}
const ROUNDS = Number(roundsArg ?? 10);
const dir = mkdtempSync(join(tmpdir(), "hangar-bench-ab-"));
const file = join(dir, "chunks.bin");
writeFileSync(file, randomBytes(8 * 1024 * 1024));

const cases: [label: string, command: string, params: unknown, perRound: number][] = [
  ["version", "version", {}, 100],
  ["screenshot png", "screenshot", { format: "png" }, 10],
  ["screenshot jpeg", "screenshot", { format: "jpeg", quality: 80 }, 10],
  ["read_bytes 1 MiB", "read_bytes", { path: file, offset: 1024 * 1024, length: 1024 * 1024 }, 20],
];

const rows: Row[] = [];
for (const [label, command, params, perRound] of cases) {
  const times: Record<string, number[]> = { A: [], B: [] };
  for (let round = 0; round < ROUNDS; round++) {
    // A first in even rounds, B first in odd ones.
    const both: [string, string][] = [
      ["A", a],
      ["B", b],
    ];
    const order = round % 2 === 0 ? both : both.reverse();
    for (const [name, url] of order) {
      const call = timedPost(url, command, params);
      times[name].push(...(await sample(perRound, call.run, { warmup: 2 })));
      call.check();
    }
  }
  for (const name of ["A", "B"]) {
    rows.push({ name: `${label} (${name})`, ...summarize(times[name]), note: `${times[name].length} calls` });
  }
}
closeClient();
rmSync(dir, { recursive: true, force: true });
printTable(`A = ${a}, B = ${b}, ${ROUNDS} interleaved rounds`, rows);
