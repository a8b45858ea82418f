/** Runs one of the project's scripts for a test set-up, its output shown on stderr as it comes. */
import { spawn } from "node:child_process";
import { resolve } from "node:path";

/** `scripts/<name>` with `args`; resolves to its exit code (null when a signal ended it). */
export function runScript(name: string, args: string[]): Promise<number | null> {
  const script = resolve(import.meta.dirname, "..", "..", "scripts", name);
  return new Promise((done, fail) => {
    // stdin stays the terminal's, for sudo's password when the script asks it for root.
    const child = spawn(script, args, { stdio: ["inherit", process.stderr, process.stderr] });
    child.once("error", fail);
    child.once("exit", done);
  });
}
