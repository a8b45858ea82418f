/** Runs the `hangar` command line in this process (its parser, its client) and gives what it printed. */
import { buildProgram } from "../../src/cli/main.js";

export async function runCli(...args: string[]): Promise<string> {
  let out = "";
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string) => {
    out += chunk;
    return true;
  }) as typeof process.stdout.write;
  try {
    const program = buildProgram();
    program.exitOverride();
    await program.parseAsync(["node", "hangar", ...args]);
  } finally {
    process.stdout.write = write;
  }
  return out;
}
