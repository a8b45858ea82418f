/**
 * What pointer and keyboard commands (and `computer_action`) say of whether they worked: `effect`
 * and `evidence` (src/desktop/effect.ts), the `verify` parameters that make them wait for it, and
 * the line a model reads.
 */
import { z } from "zod";
import type { CommandContext } from "../src/computer/core/command.js";
import type { DesktopBackend } from "../src/desktop/backend.js";
import {
  type Aim,
  beginEffectCheck,
  DEFAULT_WAIT_MS,
  type EffectCheck,
  type EffectReport,
} from "../src/desktop/effect.js";

export const verifyParams = {
  verify: z
    .boolean()
    .default(false)
    .describe(
      "Wait (up to verify_ms) for a sign that the action had an effect: the screen changing where it was aimed, " +
        "the focus moving, the typed text in the focused element. Without it, effect is what is known at once",
    ),
  verify_ms: z
    .number()
    .int()
    .min(50)
    .max(10_000)
    .default(DEFAULT_WAIT_MS)
    .describe("The longest wait of verify, in milliseconds (default 500)"),
};
export type VerifyParams = { verify: boolean; verify_ms: number };

const rect = z.object({ x: z.number(), y: z.number(), width: z.number(), height: z.number() });
export const effectSchema = z
  .enum(["confirmed", "unverifiable", "suspected_noop"])
  .describe(
    "confirmed: the screen changed where the action was aimed, the focus moved, or the typed text is in the focused " +
      "element; suspected_noop: nothing changed within verify_ms; unverifiable: neither could be told",
  );
export const evidenceSchema = z.object({
  reason: z.string().describe("Why, in a few words"),
  changed: rect.optional().describe("The box around where the screen changed, in screen pixels"),
  focus: z
    .object({ before: z.string().nullable(), after: z.string().nullable() })
    .optional()
    .describe("The focused window (and element) before and after, with verify"),
  text: z.string().optional().describe("The focused element's text, where the typed text was found in it"),
  waited_ms: z.number().describe("How long the check waited after the action"),
});
export const effectFields = { effect: effectSchema, evidence: evidenceSchema };
/** The same, for replies where an action may have none (a screenshot, a wait). */
export const optionalEffect = { effect: effectSchema.optional(), evidence: evidenceSchema.optional() };
export const effectReport = z.object(effectFields);

/** Starts the check of an action's effect, before the action (see src/desktop/effect.ts). */
export function checkEffect(
  ctx: CommandContext,
  desktop: DesktopBackend,
  params: VerifyParams,
): Promise<EffectCheck> {
  if (!params.verify) return beginEffectCheck(desktop);
  return beginEffectCheck(desktop, {
    verify: true,
    waitMs: params.verify_ms,
    accessibility: () => ctx.accessibility(),
    signal: ctx.signal,
  });
}

/** Runs `action` on the desktop inside a check of its effect; `aim` says, from its result, where it aimed. */
export async function withEffect<T extends object>(
  ctx: CommandContext,
  params: VerifyParams,
  action: (desktop: DesktopBackend) => Promise<T>,
  aim: (result: T) => Aim,
): Promise<T & EffectReport> {
  const desktop = await ctx.desktop();
  const check = await checkEffect(ctx, desktop, params);
  let result: T;
  try {
    result = await action(desktop);
  } catch (err) {
    check.cancel();
    throw err;
  }
  return { ...result, ...(await check.finish(aim(result))) };
}

/**
 * The line a model reads about an effect, when it was asked to be verified (without `verify` a tool
 * result is what it always was: what is known at once depends on timing, and is in the reply's
 * `effect` for the author).
 */
export function effectLine(report: EffectReport | undefined, verified: boolean): string | undefined {
  if (!report || !verified) return undefined;
  const name = report.effect === "suspected_noop" ? "suspected no-op" : report.effect;
  return `Effect: ${name} (${report.evidence.reason}).`;
}
