/**
 * Trajectories of this computer: `start_trajectory`, `stop_trajectory`, `trajectory_status`. While
 * one is open, every command any client runs is written to it as it happens (docs/trajectories.md).
 */
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import { type CommandContext, defineCommand } from "../src/computer/core/command.js";
import type { Trajectories } from "../src/computer/core/trajectories/trajectories.js";

const summary = z.object({
  id: z.string(),
  dir: z.string(),
  name: z.string().optional(),
  started: z.string(),
  steps: z.number(),
  bytes: z.number(),
});

function trajectories(ctx: CommandContext): Trajectories {
  if (!ctx.trajectories) throw new CommandError("unavailable", "This server records no trajectories");
  return ctx.trajectories;
}

export const startTrajectory = defineCommand({
  name: "start_trajectory",
  description:
    "Starts writing a trajectory: every command any client runs from now on, with the screenshots the " +
    "agents were sent, to a JSON-lines file in the server's trajectory directory. Closes the open one first.",
  params: z.object({
    name: z.string().min(1).max(200).optional().describe("what this session is for (the task)"),
  }),
  result: summary,
  handler: ({ name }, ctx) => trajectories(ctx).start(name),
});

export const stopTrajectory = defineCommand({
  name: "stop_trajectory",
  description:
    "Closes the open trajectory and returns its id, directory and step count (with --trajectory-dir, the " +
    "next one opens at once). Download it with GET /trajectories/{id}.tar.",
  params: z.object({}),
  result: summary,
  handler: (_params, ctx) => trajectories(ctx).stop(),
});

export const trajectoryStatus = defineCommand({
  name: "trajectory_status",
  description: "The open trajectory (id, steps so far), or null, and whether every command is recorded.",
  params: z.object({}),
  result: z.object({ trajectory: summary.nullable(), always: z.boolean(), dir: z.string() }),
  handler: (_params, ctx) => {
    const t = trajectories(ctx);
    return { trajectory: t.status(), always: t.always, dir: t.dir };
  },
});

export default [startTrajectory, stopTrajectory, trajectoryStatus];
