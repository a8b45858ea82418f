/**
 * The step an agent waits on, A/B between two builds of Hangar on the same screen: `computer_action`
 * left_click + its 1280x800 PNG screenshot of a 1920x1080 scene, a bare `left_click` (what an
 * action's effect check costs when it is not asked to verify), and the JPEG q80 and PNG screenshots
 * of the 1080p screen, in the two scenes an agent sees (bench/scene.ts): one character typed into a
 * text field before each call, and a whole text-filled screen whose background is repainted before
 * each call (a page loaded, a window switched); and on an unchanged screen. Both servers
 * (`hangar serve --no-virtual-display`, separate processes) drive one Xvfb + openbox; rounds
 * alternate which goes first, so that the machine's load weighs on both alike. Claude's computer
 * toolset (a turn of `left_click` and `screenshot`), and the same with `verify: true`, are measured
 * on A alone when the baseline predates them (`baseline: false`).
 *
 *   npm run build && node --import tsx bench/step-ab.ts --baseline ../main/bin/hangar.js [--rounds 6]
 *
 * A is this checkout's `bin/hangar.js`, B the baseline's (another checkout's, built).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { startVirtualDisplay } from "../src/desktop/virtual-display.js";
import { closeClient, timedPost } from "./client.js";
import { machineLoad, median, ms, p95, printMarkdown, sample } from "./lib.js";
import { sceneOn, screenChanger, wholeScreenChanger } from "./scene.js";
import { type SpawnedServer, spawnHangar } from "./support.js";

const { values } = parseArgs({
  options: {
    baseline: { type: "string" },
    rounds: { type: "string", default: "6" },
  },
});
if (!values.baseline) {
  console.error("usage: bench/step-ab.ts --baseline PATH/bin/hangar.js [--rounds N]");
  process.exit(2);
}
const ROUNDS = Number(values.rounds);
const WIDTH = 1920;
const HEIGHT = 1080;
const click = {
  action: { action: "left_click", coordinate: [640, 780] },
  display: { width: 1280, height: 800 },
};
/** On the bare desktop: nothing on the screen changes (a click in the entry restarts its caret's blink). */
const stillClick = { ...click, action: { action: "left_click", coordinate: [1150, 400] } };
/** The same step as Claude's computer toolset asks for it: a turn of two member calls. */
const member = (id: string, name: string, input: Record<string, unknown>) => ({
  type: "tool_use",
  id,
  name,
  input,
  toolset_name: "computer",
});
const toolsetTurn = (coordinate: number[]) => ({
  actions: [member("toolu_1", "left_click", { coordinate }), member("toolu_2", "screenshot", {})],
  display: click.display,
});

const display = await startVirtualDisplay({ width: WIDTH, height: HEIGHT });
const scene = await sceneOn(display.display, WIDTH, HEIGHT);
const started: SpawnedServer[] = [];
let whole: Awaited<ReturnType<typeof wholeScreenChanger>> | undefined;
try {
  const env = { DISPLAY: display.display };
  const a = await spawnHangar(["serve", "--no-virtual-display"], env);
  started.push(a);
  const b = await spawnHangar(["serve", "--no-virtual-display"], env, { bin: values.baseline });
  started.push(b);
  const sides = [a.url, b.url];
  const loadBefore = machineLoad();
  const typeOne = await screenChanger(a.url);
  const operations: {
    name: string;
    command: string;
    params: unknown;
    runs: number;
    target: string;
    /** What changes before each call: one character typed, the whole screen, or nothing. */
    scene: "character" | "whole" | "still";
    /** False: the baseline has no such call; A alone is measured. */
    baseline?: boolean;
  }[] = [
    {
      name: "computer_action left_click + 1280x800 PNG, one character typed",
      command: "computer_action",
      params: click,
      runs: 10,
      target: "≤ 10 ms",
      scene: "character",
    },
    {
      name: "toolset turn left_click + screenshot member (1280x800 PNG), one character typed",
      command: "computer_action",
      params: toolsetTurn([640, 780]),
      runs: 10,
      target: "≤ 15 ms",
      scene: "character",
      baseline: false,
    },
    {
      name: "toolset turn type + screenshot with verify: true (the entry redraws: no wait to the bound)",
      command: "computer_action",
      params: {
        actions: [member("toolu_1", "type", { text: "x" }), member("toolu_2", "screenshot", {})],
        display: click.display,
        verify: true,
      },
      runs: 10,
      target: "",
      scene: "character",
      baseline: false,
    },
    {
      name: "left_click at x,y (its effect answered at once, unverified)",
      command: "left_click",
      params: { x: 960, y: 1053 },
      runs: 20,
      target: "B + ≤ 2 ms",
      scene: "still",
    },
    {
      name: "screenshot JPEG q80 1920x1080, one character typed",
      command: "screenshot",
      params: { format: "jpeg", quality: 80 },
      runs: 10,
      target: "≤ 8 ms",
      scene: "character",
    },
    {
      name: "screenshot PNG 1920x1080, one character typed",
      command: "screenshot",
      params: { format: "png" },
      runs: 10,
      target: "",
      scene: "character",
    },
    {
      name: "computer_action left_click + 1280x800 PNG, whole screen repainted",
      command: "computer_action",
      params: click,
      runs: 10,
      target: "≤ 20 ms",
      scene: "whole",
    },
    {
      name: "screenshot JPEG q80 1920x1080, whole screen repainted",
      command: "screenshot",
      params: { format: "jpeg", quality: 80 },
      runs: 10,
      target: "≤ 12 ms",
      scene: "whole",
    },
    {
      name: "screenshot PNG 1920x1080, whole screen repainted",
      command: "screenshot",
      params: { format: "png" },
      runs: 10,
      target: "",
      scene: "whole",
    },
    // Last, with the whole-screen window gone: the click on the bare desktop takes the focus from the entry the screen changer types in.
    {
      name: "computer_action left_click + 1280x800 PNG, unchanged screen",
      command: "computer_action",
      params: stillClick,
      runs: 10,
      target: "",
      scene: "still",
    },
    {
      name: "toolset turn left_click + screenshot, verify: true, the click changes nothing (waits 500 ms)",
      command: "computer_action",
      params: { ...toolsetTurn([1150, 400]), verify: true },
      runs: 5,
      target: "",
      scene: "still",
      baseline: false,
    },
  ];
  const cells: string[][] = [];
  for (const op of operations) {
    // The whole-screen window covers the desktop while its operations run (they come together).
    if (op.scene === "whole") whole ??= await wholeScreenChanger(display.display);
    else if (whole) {
      whole.stop();
      whole = undefined;
      await sleep(500);
    }
    const setup = op.scene === "character" ? typeOne : op.scene === "whole" ? whole?.change : undefined;
    const measured = op.baseline === false ? [0] : [0, 1];
    for (const i of measured) {
      const call = timedPost(sides[i], op.command, op.params);
      await sample(5, call.run, { setup });
      call.check();
    }
    const samples: [number[], number[]] = [[], []];
    for (let round = 0; round < ROUNDS; round++) {
      for (const i of round % 2 === 0 ? measured : [...measured].reverse()) {
        const call = timedPost(sides[i], op.command, op.params);
        samples[i].push(...(await sample(op.runs, call.run, { setup, warmup: 1 })));
        call.check();
        await sleep(100);
      }
    }
    const ours = median(samples[0]);
    const theirs = samples[1].length > 0 ? median(samples[1]) : undefined;
    cells.push([
      op.name,
      `${ms(ours)} (p95 ${ms(p95(samples[0]))})`,
      theirs === undefined ? "—" : `${ms(theirs)} (p95 ${ms(p95(samples[1]))})`,
      theirs === undefined ? "—" : `${(theirs / ours).toFixed(2)}×`,
      op.target,
    ]);
  }
  printMarkdown(
    `A/B: this build (A) beside ${values.baseline} (B), ${ROUNDS} interleaved rounds (at the start: ${loadBefore})`,
    ["operation", "A median", "B median", "B ÷ A", "target"],
    cells,
  );
} finally {
  whole?.stop();
  closeClient();
  for (const server of started) await server.stop();
  scene.stop();
  await display.stop();
}
