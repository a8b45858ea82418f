/**
 * `/run_python` (the code in a temporary file, `python3 FILE`, 30 s) and `/run_bash_script`
 * (`/bin/bash FILE` in a working directory, stderr merged), as upstream answers them; the fixed
 * `/run_bash_script` answers its result. Both run through `run_command` as `/execute` does.
 */
import { randomBytes } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { rm, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { Hono } from "hono";
import type { ComputerEnv } from "../../http/env.js";
import { type ExecuteDeps, LONGEST, run } from "./execute.js";
import { jsonBody, numberField, stringField } from "./replies.js";
import { joinWords } from "./shell-words.js";

/** Upstream's deadlines, in seconds. */
const RUN_PYTHON_TIMEOUT = 30;
const BASH_DEFAULT_TIMEOUT = 100;

export function scriptRoutes(deps: ExecuteDeps) {
  const routes = new Hono<ComputerEnv>();

  routes.post("/run_python", async (c) => {
    const data = await jsonBody(c, deps.bodyLimitBytes);
    const code = stringField(data, "code");
    if (!code) return c.json({ status: "error", message: "Code not supplied!" }, 400);
    const file = join(tmpdir(), `python_exec_${randomBytes(16).toString("hex")}.py`);
    await writeFile(file, code, { mode: 0o600 });
    try {
      const ran = await run(deps, joinWords(["python3", file]), RUN_PYTHON_TIMEOUT);
      if (!ran.ok) {
        if (ran.timedOut) {
          return c.json(
            {
              status: "error",
              message: "Execution timeout: Code took too long to execute",
              error: "TimeoutExpired",
              need_more: false,
              output: null,
            },
            500,
          );
        }
        return c.json(
          { status: "error", message: ran.message, error: ran.message, need_more: false, output: null },
          500,
        );
      }
      const { stdout, stderr, return_code: rc } = ran.result;
      return c.json({
        status: rc === 0 ? "success" : "error",
        message: [stdout, stderr].filter(Boolean).join("\n"),
        need_more: false,
        output: stdout,
        error: stderr || (rc !== 0 ? `Process exited with code ${rc}` : ""),
        return_code: rc,
      });
    } finally {
      await rm(file, { force: true });
    }
  });

  routes.post("/run_bash_script", async (c) => {
    const data = await jsonBody(c, deps.bodyLimitBytes);
    const failed = (output: string, status: 400 | 500) =>
      c.json({ status: "error", output, error: "", returncode: -1 }, status);
    const script = stringField(data, "script");
    if (!script) return failed("Script not supplied!", 400);
    const timeout = numberField(data, "timeout", BASH_DEFAULT_TIMEOUT, { min: 0.001, max: LONGEST });
    const given = stringField(data, "working_dir");
    const cwd = given ? (given.startsWith("~") ? `${homedir()}${given.slice(1)}` : given) : undefined;
    if (cwd && !(existsSync(cwd) && statSync(cwd).isDirectory())) {
      return failed(`Working directory does not exist: ${given}`, 400);
    }
    const file = join(tmpdir(), `bash_exec_${randomBytes(16).toString("hex")}.sh`);
    await writeFile(file, script.includes("#!/bin/bash") ? script : `#!/bin/bash\n\n${script}`, {
      mode: 0o700,
    });
    try {
      const ran = await run(deps, `${joinWords(["/bin/bash", file])} 2>&1`, timeout, cwd);
      if (!ran.ok) {
        return failed(
          ran.timedOut ? `Script execution timed out after ${timeout} seconds` : ran.message,
          500,
        );
      }
      const rc = ran.result.return_code;
      return c.json({
        status: rc === 0 ? "success" : "error",
        output: ran.result.stdout,
        error: "",
        returncode: rc,
      });
    } finally {
      await rm(file, { force: true });
    }
  });

  return routes;
}
