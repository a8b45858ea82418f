/**
 * run_command benchmark (issue 19): `echo hi` end to end over HTTP with warm shells (the default)
 * beside a shell spawned per command (`--warm-shells 0`), each with the server at its idle size and
 * grown to about 250 MB (a probe holds the memory and watches the event loop: bench/loop-probe.mjs).
 * Rounds of 33 commands back to back, as bench/compare.ts sends them, interleaved between the
 * servers with a pause after each (a warm server replaces its shells then, which would otherwise
 * slow the next server's round); `version` beside them is the floor of a command over HTTP. Then
 * the same without HTTP, in this process, and, when Python 3 is here,
 * `asyncio.create_subprocess_shell` (how cua's server runs a command) as a reference.
 * Run after `npm run build`: node --import tsx bench/shell.ts [--rounds 5]
 */
import { spawnSync } from "node:child_process";
import { once } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { runShell } from "../src/os/process.js";
import { WarmShells } from "../src/os/warm-shells.js";
import { median, ms, p95, printMarkdown, sample } from "./lib.js";
import { cmd, type SpawnedServer, spawnHangar } from "./support.js";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "5" } } });
const ROUNDS = Number(values.rounds);
const BURST = 30;
const WARMUP = 3;
/** Memory a probe holds in the grown servers: about 250 MB in all. */
const BALLAST_MB = 180;
/** Between bursts, so that each runs on a machine left quiet by the one before (ms). */
const PAUSE_MS = 300;

/** What bench/loop-probe.mjs answers. */
interface Stall {
  longestMs: number;
  ballastMb: number;
}

interface Side {
  name: string;
  server: SpawnedServer;
  echo: number[];
  version: number[];
  /** The event loop's longest stall while each command ran. */
  stalls: number[];
}

/** Calls `fn` WARMUP + BURST times back to back; the times of the last BURST. */
const burst = (fn: () => Promise<unknown>) => sample(BURST, fn, { warmup: WARMUP });

/** The server's longest event-loop stall since the previous call. */
function stall(server: SpawnedServer): Promise<Stall> {
  const reply = once(server.child, "message").then(([message]) => message as Stall);
  server.child.send("stall");
  return reply;
}

async function startSide(name: string, args: string[], ballastMb: number): Promise<Side> {
  const server = await spawnHangar(
    ["serve", "--no-virtual-display", ...args],
    { BENCH_BALLAST_MB: String(ballastMb) },
    { nodeArgs: ["--import", "./bench/loop-probe.mjs"], ipc: true },
  );
  return { name, server, echo: [], version: [], stalls: [] };
}

const echoHi = (url: string) => async () => {
  const r = await cmd(url, "run_command", { command: "echo hi" });
  if (r.stdout !== "hi\n") throw new Error(`wrong output: ${JSON.stringify(r)}`);
};

const sides = [
  await startSide("warm shells", [], 0),
  await startSide("spawn per command", ["--warm-shells", "0"], 0),
  await startSide(`warm shells, +${BALLAST_MB} MB`, [], BALLAST_MB),
  await startSide(`spawn per command, +${BALLAST_MB} MB`, ["--warm-shells", "0"], BALLAST_MB),
];
const cells: string[][] = [];
try {
  // The first command starts the launcher; its shells are then ready before the first round.
  for (const side of sides) await echoHi(side.server.url)();
  await sleep(500);
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? sides : [...sides].reverse();
    for (const side of order) {
      side.version.push(...(await burst(() => cmd(side.server.url, "version"))));
      side.echo.push(...(await burst(echoHi(side.server.url))));
      // A warm server starts its replacement shells now: not during the next server's burst.
      await sleep(PAUSE_MS);
    }
  }
  // The event loop while each command runs (asked between commands, so not timed above).
  for (const side of sides) {
    for (let i = 0; i < WARMUP + BURST; i++) {
      await stall(side.server);
      await echoHi(side.server.url)();
      const { longestMs } = await stall(side.server);
      if (i >= WARMUP) side.stalls.push(longestMs);
    }
  }
  for (const side of sides) {
    cells.push([
      side.name,
      `${ms(median(side.echo))} (p95 ${ms(p95(side.echo))})`,
      ms(median(side.version)),
      ms(median(side.echo) - median(side.version)),
      `${ms(median(side.stalls))} (p95 ${ms(p95(side.stalls))})`,
      `${side.server.rssMb().toFixed(0)} MB`,
    ]);
  }
} finally {
  for (const side of sides) await side.server.stop();
}
printMarkdown(
  `run_command echo hi over HTTP: ${ROUNDS} rounds of ${WARMUP}+${BURST} back to back, interleaved`,
  [
    "server",
    "run_command median",
    "version median",
    "command above version",
    "longest event-loop stall per command (1 ms: none)",
    "RSS",
  ],
  cells,
);

// Without HTTP: the shell alone, in this process.
const inProcess: string[][] = [];
const warm = new WarmShells({ idle: BURST + WARMUP, max: BURST + WARMUP });
await warm.warmUp();
await sleep(PAUSE_MS);
for (const [name, pool] of [
  ["runShell, warm shell", warm],
  ["runShell, spawned shell", undefined],
] as const) {
  const times: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    times.push(...(await burst(() => runShell({ command: "echo hi", warm: pool }))));
    await warm.warmUp();
    // A shell is reported once forked, and reads its input a few exec's later.
    await sleep(PAUSE_MS);
  }
  inProcess.push([name, `${ms(median(times))} (p95 ${ms(p95(times))})`]);
}
warm.close();
const python = spawnSync("python3", ["-c", PYTHON_REFERENCE(ROUNDS)], { encoding: "utf8" });
if (python.status === 0) {
  const times = JSON.parse(python.stdout) as number[];
  inProcess.push([
    "Python asyncio.create_subprocess_shell (cua's way)",
    `${ms(median(times))} (p95 ${ms(p95(times))})`,
  ]);
}
printMarkdown("echo hi without HTTP, in one process", ["how", "median"], inProcess);

/** Times `create_subprocess_shell("echo hi")` in bursts, as cua's server runs a command; prints the ms. */
function PYTHON_REFERENCE(rounds: number) {
  return `
import asyncio, json, time
async def main():
    times = []
    for _ in range(${rounds}):
        for i in range(${WARMUP + BURST}):
            start = time.perf_counter()
            proc = await asyncio.create_subprocess_shell("echo hi", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await proc.communicate()
            assert out == b"hi\\n"
            if i >= ${WARMUP}:
                times.append((time.perf_counter() - start) * 1000)
        await asyncio.sleep(0.1)
    print(json.dumps(times))
asyncio.run(main())
`;
}
