/**
 * The step an agent waits on, A/B between two builds of Hangar on the same screen: `computer_action`
 * left_click + its 1280x800 PNG screenshot of a 1920x1080 scene (changed before each call, and
 * unchanged), and the JPEG q80 and PNG screenshots of the changed 1080p screen. Both servers
 * (`hangar serve --no-virtual-display`, separate processes) drive one Xvfb + openbox; rounds
 * alternate which goes first, so that the machine's load weighs on both alike.
 *
 *   npm run build && node --import tsx bench/step-ab.ts --baseline ../main/bin/hangar.js [--rounds 6]
 *
 * A is this checkout's `bin/hangar.js`, B the baseline's (another checkout's, built).
 */
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { startVirtualDisplay } from "../src/desktop/virtual-display.js";
import { closeClient, timedPost } from "./client.js";
import { median, ms, p95, printMarkdown, sample } from "./lib.js";
import { sceneOn, screenChanger } from "./scene.js";
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

const display = await startVirtualDisplay({ width: WIDTH, height: HEIGHT });
const scene = await sceneOn(display.display, WIDTH, HEIGHT);
const started: SpawnedServer[] = [];
try {
  const env = { DISPLAY: display.display };
  const a = await spawnHangar(["serve", "--no-virtual-display"], env);
  started.push(a);
  const b = await spawnHangar(["serve", "--no-virtual-display"], env, { bin: values.baseline });
  started.push(b);
  const sides = [a.url, b.url];
  const change = await screenChanger(a.url);
  const operations: {
    name: string;
    command: string;
    params: unknown;
    runs: number;
    target: string;
    changed: boolean;
  }[] = [
    {
      name: "computer_action left_click + 1280x800 PNG, screen changed",
      command: "computer_action",
      params: click,
      runs: 10,
      target: "≤ 15 ms",
      changed: true,
    },
    {
      name: "screenshot JPEG q80 1920x1080, screen changed",
      command: "screenshot",
      params: { format: "jpeg", quality: 80 },
      runs: 10,
      target: "≤ 8 ms",
      changed: true,
    },
    {
      name: "screenshot PNG 1920x1080, screen changed",
      command: "screenshot",
      params: { format: "png" },
      runs: 10,
      target: "",
      changed: true,
    },
    // Last: the click on the bare desktop takes the focus from the entry the screen changer types in.
    {
      name: "computer_action left_click + 1280x800 PNG, unchanged screen",
      command: "computer_action",
      params: stillClick,
      runs: 10,
      target: "",
      changed: false,
    },
  ];
  const cells: string[][] = [];
  for (const op of operations) {
    const setup = op.changed ? change : undefined;
    for (const url of sides) {
      const call = timedPost(url, op.command, op.params);
      await sample(5, call.run, { setup });
      call.check();
    }
    const samples: [number[], number[]] = [[], []];
    for (let round = 0; round < ROUNDS; round++) {
      for (const i of round % 2 === 0 ? [0, 1] : [1, 0]) {
        const call = timedPost(sides[i], op.command, op.params);
        samples[i].push(...(await sample(op.runs, call.run, { setup, warmup: 1 })));
        call.check();
        await sleep(100);
      }
    }
    const [ours, theirs] = samples.map(median);
    cells.push([
      op.name,
      `${ms(ours)} (p95 ${ms(p95(samples[0]))})`,
      `${ms(theirs)} (p95 ${ms(p95(samples[1]))})`,
      `${(theirs / ours).toFixed(2)}×`,
      op.target,
    ]);
  }
  printMarkdown(
    `A/B: this build (A) beside ${values.baseline} (B), ${ROUNDS} interleaved rounds`,
    ["operation", "A median", "B median", "B ÷ A", "target"],
    cells,
  );
} finally {
  closeClient();
  for (const server of started) await server.stop();
  scene.stop();
  await display.stop();
}
