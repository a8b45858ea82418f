/**
 * Trajectory benchmark (issue 35): what writing every command to a trajectory costs.
 * - on the reply's path: the timeline's listener, which only queues the step (activity.record with
 *   and without an open trajectory);
 * - off it: writing one step to disk (line, and a screenshot's file when it has one), from the
 *   queueing to the write's completion, one command at a time;
 * - end to end: `version` over /cmd with and without an open trajectory, interleaved rounds.
 * Run: node --import tsx bench/trajectory.ts
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { leftClick } from "../commands/input.js";
import { screenshot as screenshotCommand } from "../commands/screenshot.js";
import { silentLogger } from "../src/common/logger.js";
import { ActivityLog, type CommandRun } from "../src/computer/core/activity.js";
import { Bytes } from "../src/computer/core/bytes.js";
import { Trajectories } from "../src/computer/core/trajectories/trajectories.js";
import { startTestServer } from "../test/support/server.js";
import { closeClient, timedPost } from "./client.js";
import { printTable, type Row, sample, summarize } from "./lib.js";

const RUNS = 2000;
const dir = mkdtempSync(join(tmpdir(), "hangar-bench-trajectory-"));
const rows: Row[] = [];

const click: CommandRun = {
  command: "left_click",
  flags: leftClick,
  params: { x: 640, y: 400 },
  transport: "http",
  ms: 1.2,
  outcome: { success: true, result: {} },
};
// A screenshot's reply as the timeline keeps it: 100 KB of PNG.
const png = new Bytes(Buffer.alloc(100 * 1024, 7), "image/png");
const screenshot: CommandRun = {
  command: "screenshot",
  flags: screenshotCommand,
  params: { format: "png" },
  transport: "http",
  ms: 12,
  outcome: { success: true, result: { image_data: png, format: "png", width: 1280, height: 800, scale: 1 } },
};

async function recordCost(withTrajectory: boolean) {
  const activity = new ActivityLog();
  const trajectories = new Trajectories({
    activity,
    dir: join(dir, "cost"),
    always: withTrajectory,
    log: silentLogger,
  });
  await trajectories.ready;
  const samples = await sample(RUNS, async () => activity.record(click), { warmup: 100 });
  await trajectories.close();
  return samples;
}

try {
  const without = await recordCost(false);
  const withOne = await recordCost(true);
  const micro = (ms: number[]) =>
    summarize(
      ms.map((x) => x * 1000),
      "µs",
      1,
    );
  rows.push({ name: "on the reply's path: activity.record of a click, no trajectory", ...micro(without) });
  rows.push({ name: "the same with an open trajectory (the step is only queued)", ...micro(withOne) });

  // Off the path: queue → on disk, one command at a time.
  const activity = new ActivityLog();
  const trajectories = new Trajectories({
    activity,
    dir: join(dir, "write"),
    always: true,
    log: silentLogger,
  });
  await trajectories.ready;
  for (const [name, run] of [
    ["writing one step to disk (a click: one line)", click],
    ["writing one step with its screenshot (100 KB PNG: file, then line)", screenshot],
  ] as const) {
    const times = await sample(
      name.includes("screenshot") ? RUNS / 4 : RUNS,
      async () => {
        activity.record(run);
        await trajectories.settle();
      },
      { warmup: 20 },
    );
    rows.push({
      name,
      ...summarize(times),
      target: name.includes("click") ? "≤ 0.3 ms median, off the reply's path" : "",
    });
  }
  await trajectories.close();

  // End to end over HTTP, interleaved.
  const plain = await startTestServer({ trajectories: { dir: join(dir, "off") } });
  const recorded = await startTestServer({ trajectories: { dir: join(dir, "on"), always: true } });
  const off: number[] = [];
  const on: number[] = [];
  for (let round = 0; round < 10; round++) {
    for (const [server, into] of [
      [plain, off],
      [recorded, on],
    ] as const) {
      const call = timedPost(server.url, "version");
      into.push(...(await sample(200, call.run, { warmup: 20 })));
      call.check();
    }
  }
  rows.push({ name: "`version` over /cmd, no trajectory", ...summarize(off) });
  rows.push({ name: "`version` over /cmd, every command written to a trajectory", ...summarize(on) });
  closeClient();
  await plain.close();
  await recorded.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
printTable("Trajectories", rows);
