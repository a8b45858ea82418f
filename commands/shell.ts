/** `run_command`: a shell command line, its output and exit code. */
import { existsSync, statSync } from "node:fs";
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import { type CommandContext, defineCommand } from "../src/computer/core/command.js";
import { expandPath } from "../src/os/paths.js";
import { runShell } from "../src/os/process.js";

/** A command without a timeout may still not outlive this (seconds). */
const LONGEST_RUN_SECONDS = 3600;
/** Output already sent as events is not collected again for the final result. */
const STREAMED_KEPT_BYTES = 0;

export const runCommand = defineCommand({
  name: "run_command",
  aliases: ["shell", "exec"],
  description:
    "Runs a command line with the system shell and returns stdout, stderr and return_code. A non-zero exit " +
    "is still a success; on timeout the whole process group is killed. With stream: true (on /cmd), output " +
    "arrives as {stream, data} events while the command runs and the final result's stdout/stderr are empty.",
  params: z.object({
    command: z.string().min(1, "must not be empty"),
    timeout: z.number().positive().max(LONGEST_RUN_SECONDS).nullish().describe("seconds"),
    cwd: z.string().min(1).nullish(),
    env: z.record(z.string(), z.string()).nullish(),
    stream: z.boolean().nullish().describe("send output as events while it arrives (/cmd only)"),
  }),
  result: z.object({ stdout: z.string(), stderr: z.string(), return_code: z.number() }),
  deadlineMs: (p) => ((p.timeout ?? LONGEST_RUN_SECONDS) + 5) * 1000,
  handler: async (p, ctx) => {
    const cwd = p.cwd ? expandPath(p.cwd) : undefined;
    if (cwd && !(await isDirectory(cwd, ctx))) {
      throw new CommandError("not_found", `Working directory does not exist: ${p.cwd}`);
    }
    // Streaming needs a transport that can send more than one event; elsewhere the flag changes nothing.
    const emit = p.stream ? ctx.emit : undefined;
    const run = await runShell({
      command: p.command,
      cwd,
      env: p.env ?? undefined,
      timeoutSeconds: p.timeout ?? undefined,
      signal: ctx.signal,
      onOutput: emit ? (stream, data) => emit({ stream, data }) : undefined,
      maxOutputBytes: emit ? STREAMED_KEPT_BYTES : undefined,
      warm: ctx.shells,
      user: ctx.commandUser,
    });
    if (run.timedOut) {
      throw new CommandError("timeout", `Command timed out after ${p.timeout}s`, {
        stdout: emit ? "" : run.stdout,
        stderr: `Command timed out after ${p.timeout}s`,
        return_code: -1,
      });
    }
    if (emit) return { stdout: "", stderr: "", return_code: run.returnCode };
    return { stdout: run.stdout, stderr: run.stderr, return_code: run.returnCode };
  },
});

export default [runCommand];

/** Whether `dir` is a directory the desktop's user sees (a command user's own view, else this process's at once). */
async function isDirectory(dir: string, ctx: CommandContext): Promise<boolean> {
  if (!ctx.commandUser) return existsSync(dir) && statSync(dir).isDirectory();
  return ctx.files.stat(dir).then(
    (info) => info.isDirectory(),
    () => false,
  );
}
