/**
 * Hangar side by side with another cua-compatible computer server (`npm run bench -- --compare URL`):
 * the same operations, the same client, the same screen, interleaved round by round so that load
 * from elsewhere on the machine hits both alike. Prints each server's median and the ratio
 * (other ÷ Hangar: above 1 means Hangar is faster).
 *
 * Both servers must drive the same display: `--display :N` names the one the other server uses (it
 * needs a window manager); without it the benchmark starts its own Xvfb + openbox, which only a
 * server started on it afterwards sees (`--compare hangar` starts a second Hangar there, a check of
 * the benchmark itself: its ratios should be about 1). The scene is drawn on that display and a
 * Hangar (`hangar serve --no-virtual-display`, a separate process) is started on it.
 *
 *   node --import tsx bench/compare.ts --compare http://127.0.0.1:8001 --display :77 [--rounds 3] [--only left_click,read_bytes]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { startVirtualDisplay, type VirtualDisplay } from "../src/desktop/virtual-display.js";
import { closeClient, timedPost } from "./client.js";
import { median, ms, p95, printMarkdown, sample } from "./lib.js";
import { activate, MIXED, sceneOn, screenChanger } from "./scene.js";
import { rssWhileIdle, type SpawnedServer, spawnHangar } from "./support.js";

const { values } = parseArgs({
  options: {
    compare: { type: "string" },
    display: { type: "string" },
    rounds: { type: "string", default: "3" },
    only: { type: "string" },
  },
});
if (!values.compare) {
  console.error("usage: bench/compare.ts --compare URL|hangar [--display :N] [--rounds N] [--only a,b]");
  process.exit(2);
}
const ROUNDS = Number(values.rounds);
/** `--only left_click,run_command`: the operations whose names contain one of these (all without it). */
const ONLY = values.only?.split(",").filter(Boolean);
const chosen = (name: string) => !ONLY || ONLY.some((part) => name.includes(part));
const WIDTH = 1920;
const HEIGHT = 1080;

interface Side {
  name: string;
  url: string;
}

interface Operation {
  name: string;
  command: string;
  params?: unknown;
  /** Timed calls per server and round. */
  runs: number;
  /** Untimed, before each call (e.g. to change the screen). */
  setup?: () => Promise<unknown>;
  /** Turns a median in ms into the figure shown (default: the time itself). */
  show?: (ms: number) => string;
}

const mbPerSecond = (bytes: number) => (x: number) => `${ms(x)} (${Math.round(bytes / 1e3 / x)} MB/s)`;

/**
 * Calls sent to each side, untimed, before anything is measured: a server runs warm for months, and
 * V8 optimises Hangar's request path over its first thousand requests or so (`version` took 0.45-0.65
 * ms over the first 300 and 0.32 ms after 3,000).
 */
const WARM_UP_CALLS = 2000;
/** A pause after each side's round of an operation (ms). */
const SETTLE_MS = 300;
/** Untimed calls of each operation on each side before its rounds (its own code warms up too). */
const WARM_UP_RUNS = 10;

async function warmUp(sides: [Side, Side]) {
  for (const side of sides) {
    const call = timedPost(side.url, "version");
    for (let i = 0; i < WARM_UP_CALLS; i++) await call.run();
    call.check();
  }
}

/** Runs every operation on both sides, alternating which goes first each round. */
async function compareOperations(sides: [Side, Side], operations: Operation[]): Promise<string[][]> {
  const cells: string[][] = [];
  for (const op of operations) {
    for (const side of sides) {
      const call = timedPost(side.url, op.command, op.params ?? {});
      await sample(Math.min(op.runs, WARM_UP_RUNS), call.run, { setup: op.setup });
      call.check();
      // As after each round: the warm-up's leftovers (shells to replace) are not the first round's.
      await sleep(SETTLE_MS);
    }
    const samples: [number[], number[]] = [[], []];
    for (let round = 0; round < ROUNDS; round++) {
      for (const i of round % 2 === 0 ? [0, 1] : [1, 0]) {
        const call = timedPost(sides[i].url, op.command, op.params ?? {});
        samples[i].push(...(await sample(op.runs, call.run, { setup: op.setup })));
        call.check();
        // What a side does after a round (Hangar starts shells to replace those a burst of
        // run_command used) happens before the next round, not during the other side's.
        await sleep(SETTLE_MS);
      }
    }
    const [ours, theirs] = samples.map(median);
    const show = op.show ?? ms;
    cells.push([
      op.name,
      `${show(ours)} (p95 ${ms(p95(samples[0]))})`,
      `${show(theirs)} (p95 ${ms(p95(samples[1]))})`,
      `${(theirs / ours).toFixed(2)}×`,
    ]);
  }
  return cells;
}

/** `version` at 32 connections with autocannon, rounds alternating between the sides. */
async function compareThroughput(sides: [Side, Side]): Promise<string[]> {
  const rates: [number[], number[]] = [[], []];
  for (let round = 0; round < ROUNDS; round++) {
    for (const i of round % 2 === 0 ? [0, 1] : [1, 0]) {
      const result = await autocannon({
        url: `${sides[i].url}/cmd`,
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ command: "version" }),
        connections: 32,
        duration: 3,
      });
      if (result.non2xx || result.errors) {
        throw new Error(`${sides[i].name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
      }
      rates[i].push(result.requests.average);
    }
  }
  const [ours, theirs] = rates.map(median);
  const all = (xs: number[]) => xs.map(Math.round).join(", ");
  return [
    "version, 32 connections (autocannon)",
    `${Math.round(ours)} req/s (rounds ${all(rates[0])})`,
    `${Math.round(theirs)} req/s (rounds ${all(rates[1])})`,
    `${(ours / theirs).toFixed(2)}×`,
  ];
}

const ownDisplay: VirtualDisplay | undefined = values.display
  ? undefined
  : await startVirtualDisplay({ width: WIDTH, height: HEIGHT });
const display = values.display ?? (ownDisplay as VirtualDisplay).display;
const scene = await sceneOn(display, WIDTH, HEIGHT);
const started: SpawnedServer[] = [];
const files = mkdtempSync(join(tmpdir(), "hangar-bench-compare-"));
try {
  const env = { DISPLAY: display };
  const hangar = await spawnHangar(["serve", "--no-virtual-display"], env);
  started.push(hangar);
  let otherUrl = values.compare;
  if (otherUrl === "hangar") {
    const second = await spawnHangar(["serve", "--no-virtual-display"], env);
    started.push(second);
    otherUrl = second.url;
  }
  const sides: [Side, Side] = [
    { name: "Hangar", url: hangar.url },
    { name: values.compare === "hangar" ? "second Hangar" : otherUrl, url: otherUrl },
  ];
  console.log(`Hangar ${hangar.url} and ${sides[1].name} on display ${display}; ${ROUNDS} rounds`);

  const changeScreen = await screenChanger(hangar.url);
  const chunk = Buffer.alloc(1024 * 1024, 7);
  const file = join(files, "chunk.bin");
  const screenOps: Operation[] = [
    { name: "version", command: "version", runs: 100 },
    { name: "get_screen_size", command: "get_screen_size", runs: 100 },
    { name: "get_cursor_position", command: "get_cursor_position", runs: 100 },
    {
      name: "screenshot PNG, screen changed before each",
      command: "screenshot",
      runs: 10,
      setup: changeScreen,
    },
    { name: "screenshot PNG, unchanged screen", command: "screenshot", runs: 20 },
    {
      name: "screenshot JPEG q80, screen changed before each",
      command: "screenshot",
      params: { format: "jpeg", quality: 80 },
      runs: 10,
      setup: changeScreen,
    },
    { name: "left_click at x,y", command: "left_click", params: { x: 960, y: 1000 }, runs: 50 },
    { name: "move_cursor", command: "move_cursor", params: { x: 700, y: 900 }, runs: 50 },
    { name: "run_command echo hi", command: "run_command", params: { command: "echo hi" }, runs: 30 },
    {
      name: "write_bytes 1 MiB",
      command: "write_bytes",
      params: { path: file, content_b64: chunk.toString("base64") },
      runs: 20,
      show: mbPerSecond(chunk.length),
    },
    {
      name: "read_bytes 1 MiB",
      command: "read_bytes",
      params: { path: file, offset: 0, length: chunk.length },
      runs: 20,
      show: mbPerSecond(chunk.length),
    },
  ];
  await warmUp(sides);
  const cells = await compareOperations(
    sides,
    screenOps.filter((op) => chosen(op.name)),
  );
  // Typing last: it moves the focus from the entry that changes the screen to the key recorder.
  const typing = {
    name: "type_text, 100 mixed characters",
    command: "type_text",
    params: { text: MIXED },
    runs: 10,
  };
  if (chosen(typing.name)) {
    await activate(hangar.url, "typing target");
    cells.push(...(await compareOperations(sides, [typing])));
  }
  if (chosen("version, 32 connections")) cells.push(await compareThroughput(sides));
  // The memory targets are for the whole run: a part of it neither reaches them nor waits a minute.
  if (!ONLY) {
    cells.push(["RSS of Hangar after the run (≤ 130 MB)", `${hangar.rssMb().toFixed(1)} MB`, "", ""]);
    cells.push(["RSS of Hangar once idle (≤ 100 MB by 60 s)", await rssWhileIdle(hangar), "", ""]);
  }
  printMarkdown(
    `Hangar beside ${sides[1].name} (${ROUNDS} interleaved rounds, 1920x1080 scene on ${display})`,
    ["operation", "Hangar median", `${sides[1].name} median`, "ratio (other ÷ Hangar; > 1: Hangar faster)"],
    cells,
  );
} finally {
  closeClient();
  for (const server of started) await server.stop();
  scene.stop();
  await ownDisplay?.stop();
  rmSync(files, { recursive: true, force: true });
}
