/** Commands about the server itself: `version`, `batch`, `wait`. */
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import { PACKAGE_VERSION, PROTOCOL_VERSION } from "../src/common/version.js";
import { defineCommand } from "../src/computer/core/command.js";
import { cuaReply } from "../src/computer/core/outcome.js";

export const version = defineCommand({
  name: "version",
  description: "The wire protocol version and the server package version; also a readiness probe.",
  params: z.object({}),
  result: z.object({ protocol: z.number(), package: z.string() }),
  handler: () => ({ protocol: PROTOCOL_VERSION, package: PACKAGE_VERSION }),
});

const MAX_BATCH_STEPS = 200;

export const batch = defineCommand({
  name: "batch",
  description:
    "Runs a list of commands in order in one request and stops at the first failure. The result has one " +
    "cua-shaped reply per step that ran.",
  params: z.object({
    commands: z
      .array(z.object({ command: z.string().min(1), params: z.record(z.string(), z.unknown()).nullish() }))
      .min(1)
      .max(MAX_BATCH_STEPS),
  }),
  result: z.object({ results: z.array(z.record(z.string(), z.unknown())) }),
  deadlineMs: () => 600_000,
  handler: async ({ commands }, ctx) => {
    const results: Record<string, unknown>[] = [];
    for (const [index, step] of commands.entries()) {
      if (step.command === "batch") {
        throw new CommandError(
          "invalid_params",
          `Invalid params: commands.${index}: a batch cannot contain a batch`,
        );
      }
      const outcome = await ctx.run(step.command, step.params ?? {});
      results.push(cuaReply(outcome));
      if (!outcome.success) {
        throw new CommandError(outcome.code, `Step ${index + 1} (${step.command}) failed: ${outcome.error}`, {
          results,
        });
      }
    }
    return { results };
  },
});

export const dioramaCmd = defineCommand({
  name: "diorama_cmd",
  description:
    "cua's macOS app isolation (Diorama): not supported on this server, which drives whole desktops; it " +
    "answers not_supported.",
  params: z.object({ action: z.string().optional(), arguments: z.record(z.string(), z.unknown()).nullish() }),
  result: z.object({ result: z.unknown() }),
  handler: () => {
    throw new CommandError(
      "not_supported",
      "diorama_cmd is not supported on this server: Diorama isolates macOS applications with cua's macOS " +
        "server; Hangar drives the whole desktop (use get_application_windows and activate_window)",
    );
  },
});

export const wait = defineCommand({
  name: "wait",
  description:
    "Waits `ms` milliseconds, or `duration` seconds (at most one minute; default 1 s), e.g. for a window " +
    "to appear.",
  params: z
    .object({
      ms: z.number().int().min(0).max(60_000).optional().describe("milliseconds"),
      duration: z
        .number()
        .min(0)
        .max(60)
        .optional()
        .describe("seconds, instead of ms (Anthropic's spelling)"),
    })
    .refine((p) => p.ms === undefined || p.duration === undefined, {
      message: "give either ms or duration (seconds), not both",
      path: ["duration"],
    }),
  result: z.object({ waited_ms: z.number() }),
  handler: async (params, ctx) => {
    const ms = params.duration !== undefined ? Math.round(params.duration * 1000) : (params.ms ?? 1000);
    await sleep(ms, undefined, { signal: ctx.signal }).catch(() => undefined);
    return { waited_ms: ms };
  },
});

export default [version, batch, wait, dioramaCmd];
