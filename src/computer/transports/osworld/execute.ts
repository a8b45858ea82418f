/**
 * The routes that run programs: `/execute` (and `/setup/execute`), `/execute_with_verification` and
 * `/setup/launch`. Programs run through Hangar's `run_command` (own process group, killed whole on
 * timeout; shown in the activity timeline) with the Python environment of python-env.ts, so that
 * `python -c "import pyautogui; …"` drives this desktop. `run()` serves scripts.ts too.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Hono } from "hono";
import { CommandError } from "../../../common/errors.js";
import { findProgram } from "../../../os/launch.js";
import type { ComputerEnv } from "../../http/env.js";
import { HangarCommandFailed, type OsworldCommands, runAction } from "./hangar-commands.js";
import { PYTHON_DIR } from "./python-env.js";
import { booleanField, jsonBody, numberField, type OsworldContext, text } from "./replies.js";
import { expandHomeWords, joinWords, splitWords } from "./shell-words.js";

export interface ExecuteDeps {
  commands: OsworldCommands;
  bodyLimitBytes: number;
  /** Variables for the children (python-env.ts). */
  env: () => Promise<Record<string, string>>;
}

/** Upstream's deadlines, in seconds. */
const EXECUTE_TIMEOUT = 120;
export const LONGEST = 3600;

interface RunResult {
  stdout: string;
  stderr: string;
  return_code: number;
}

export type Ran = { ok: true; result: RunResult } | { ok: false; timedOut: boolean; message: string };

export async function run(deps: ExecuteDeps, command: string, timeout: number, cwd?: string): Promise<Ran> {
  try {
    const result = await runAction<RunResult>(deps.commands, "run", {
      command,
      timeout,
      env: await deps.env(),
      ...(cwd ? { cwd } : {}),
    });
    return { ok: true, result };
  } catch (err) {
    if (err instanceof HangarCommandFailed) {
      return { ok: false, timedOut: err.code === "timeout", message: err.message };
    }
    throw err;
  }
}

/** `command` and `shell` as upstream reads them: the shell line to run and how to name it. */
export function commandLine(data: Record<string, unknown>): { line: string; argv?: string[]; shown: string } {
  const shell = booleanField(data, "shell", false);
  const raw = data.command ?? (shell ? "" : []);
  if (typeof raw === "string") {
    if (shell) return { line: raw, shown: raw };
    let words: string[];
    try {
      words = splitWords(raw);
    } catch (err) {
      throw new CommandError("invalid_params", `command: ${(err as Error).message}`);
    }
    const argv = expandHomeWords(words);
    return { line: joinWords(argv), argv, shown: raw };
  }
  if (!Array.isArray(raw) || raw.some((w) => typeof w !== "string")) {
    throw new CommandError("invalid_params", "command must be a string or a list of strings");
  }
  const argv = expandHomeWords(raw as string[]);
  if (shell) {
    // subprocess with shell=True and a list: the first item is the command line, the rest $0, $1…
    return { line: joinWords(["/bin/sh", "-c", ...argv]), shown: argv.join(" ") };
  }
  return { line: joinWords(argv), argv, shown: argv.join(" ") };
}

/** subprocess's error for a program that is not there, or undefined when it is. */
function missingProgram(argv: string[] | undefined): string | undefined {
  if (!argv) return undefined;
  if (argv.length === 0) return "list index out of range";
  const program = argv[0];
  const found = program.includes("/") ? existsSync(program) : findProgram(program) !== undefined;
  return found ? undefined : `[Errno 2] No such file or directory: '${program}'`;
}

/** Runs what `/execute` is given: upstream's body on success, else the failure reply to send. */
async function execute(c: OsworldContext, deps: ExecuteDeps, data: Record<string, unknown>) {
  const { line, argv, shown } = commandLine(data);
  const timeout = numberField(data, "timeout", EXECUTE_TIMEOUT, { min: 0.001, max: LONGEST });
  const missing = missingProgram(argv);
  if (missing) return { failed: c.json({ status: "error", message: missing }, 500) };
  const ran = await run(deps, line, timeout);
  if (!ran.ok) {
    const message = ran.timedOut ? `Command '${shown}' timed out after ${timeout} seconds` : ran.message;
    return { failed: c.json({ status: "error", message }, 500) };
  }
  return {
    body: {
      status: "success",
      output: ran.result.stdout,
      error: ran.result.stderr,
      returncode: ran.result.return_code,
    },
  };
}

export function executeRoutes(deps: ExecuteDeps) {
  const routes = new Hono<ComputerEnv>();

  const executeRoute = async (c: OsworldContext) => {
    const outcome = await execute(c, deps, await jsonBody(c, deps.bodyLimitBytes));
    return outcome.failed ?? c.json(outcome.body);
  };
  routes.post("/execute", executeRoute);
  routes.post("/setup/execute", executeRoute);

  const verified = async (c: OsworldContext) => {
    const data = await jsonBody(c, deps.bodyLimitBytes);
    const verification = data.verification ?? {};
    if (typeof verification !== "object" || verification === null || Array.isArray(verification)) {
      throw new CommandError("invalid_params", "verification must be an object");
    }
    const maxWait = numberField(data, "max_wait_time", 10, { min: 0, max: LONGEST });
    const interval = numberField(data, "check_interval", 1, { min: 0.05, max: LONGEST });
    const outcome = await execute(c, deps, data);
    if (outcome.failed) return outcome.failed;
    const checks = verification as Record<string, unknown>;
    if (Object.keys(checks).length === 0) return c.json(outcome.body);
    const started = performance.now();
    while ((performance.now() - started) / 1000 < maxWait) {
      if (await verificationPasses(deps, checks)) {
        const waited = (performance.now() - started) / 1000;
        return c.json({ ...outcome.body, verification: "passed", wait_time: waited });
      }
      await sleep(interval * 1000);
    }
    return c.json(
      { ...outcome.body, status: "verification_failed", verification: "failed", wait_time: maxWait },
      500,
    );
  };
  routes.post("/execute_with_verification", verified);
  routes.post("/setup/execute_with_verification", verified);

  routes.post("/setup/launch", async (c) => {
    const data = await jsonBody(c, deps.bodyLimitBytes);
    const shell = booleanField(data, "shell", false);
    const { argv, shown } = commandLine(data);
    let words = argv;
    if (words && ["arm64"].includes(process.arch)) {
      words = words.map((w) => (w === "google-chrome" ? "chromium" : w));
    }
    const named = words;
    if (words?.length && !words[0].includes("/") && !findProgram(words[0])) {
      // A program OSWorld's tasks expect and the desktop lacks, that Hangar provides (google-chrome).
      const provided = join(PYTHON_DIR, "bin", words[0]);
      if (existsSync(provided)) words = [provided, ...words.slice(1)];
    }
    try {
      if (shell || !words) {
        await runAction(deps.commands, "startProgram", { app: shown });
      } else {
        if (words.length === 0) return c.json({ status: "error", message: "list index out of range" }, 500);
        await runAction(deps.commands, "startProgram", { app: words[0], args: words.slice(1) });
      }
    } catch (err) {
      if (err instanceof HangarCommandFailed) return c.json({ status: "error", message: err.message }, 500);
      throw err;
    }
    return text(c, `${shell ? shown : (named ?? []).join(" ")} launched successfully`);
  });

  return routes;
}

/** One round of `verification`: a window whose title contains a text, and/or a command that succeeds. */
async function verificationPasses(deps: ExecuteDeps, checks: Record<string, unknown>): Promise<boolean> {
  if (typeof checks.window_exists === "string") {
    const ran = await run(deps, "wmctrl -l", 5);
    if (!ran.ok || !ran.result.stdout.toLowerCase().includes(checks.window_exists.toLowerCase()))
      return false;
  }
  if (typeof checks.command_success === "string") {
    const ran = await run(deps, checks.command_success, 5);
    if (!ran.ok || ran.result.return_code !== 0) return false;
  }
  return true;
}
