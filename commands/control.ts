/**
 * Asking a person for help: `request_help` shows the request in the console (and on `/events`) and
 * returns when the person who took control hands it back, with what they wrote, or when `timeout`
 * passes. See src/computer/core/control.ts for the lease itself.
 */
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import { defineCommand } from "../src/computer/core/command.js";

/** The longest a request waits for a person: a day. */
const MAX_TIMEOUT_S = 86_400;

export const requestHelp = defineCommand({
  name: "request_help",
  description:
    "Asks a person for help (a login, a 2FA code, a captcha): the web console shows `reason`; the person takes " +
    "control, does it, and hands control back with a note, which this returns. Fails with timeout when no one " +
    "hands control back within `timeout` seconds.",
  params: z.object({
    reason: z
      .string()
      .trim()
      .min(1, "reason is empty")
      .max(2000)
      .describe("What the person should do, and why"),
    timeout: z
      .number()
      .min(1)
      .max(MAX_TIMEOUT_S)
      .default(600)
      .describe("Seconds to wait for the hand-back (default 600)"),
  }),
  result: z.object({
    note: z.string().describe("What the person wrote when handing control back (may be empty)"),
    by: z.string().describe("Who handed control back"),
    at: z.string().describe("When (ISO 8601)"),
  }),
  deadlineMs: ({ timeout }) => timeout * 1000 + 5000,
  handler: async ({ reason, timeout }, ctx) => {
    if (!ctx.control)
      throw new CommandError("not_supported", "This server has no console to ask a person through");
    const timer = AbortSignal.timeout(timeout * 1000);
    try {
      return await ctx.control.requestHelp(reason, AbortSignal.any([ctx.signal, timer]));
    } catch (err) {
      if (timer.aborted && !ctx.signal.aborted) {
        throw new CommandError("timeout", `No one handed control back within ${timeout} s`);
      }
      throw err;
    }
  },
});

export default [requestHelp];
