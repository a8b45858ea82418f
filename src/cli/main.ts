/** The `hangar` command line: one program, a module per group of commands. */
import { Command, CommanderError } from "commander";
import { PACKAGE_VERSION } from "../common/version.js";
import { registerConfig, registerLogs } from "./config.js";
import { registerHost } from "./host.js";
import { registerServe } from "./serve.js";
import { registerVm } from "./vm.js";

export function buildProgram(): Command {
  const program = new Command("hangar")
    .description("Computers for AI agents: the computer server (serve) and the VM host service (host serve)")
    .version(PACKAGE_VERSION)
    .showHelpAfterError("(run with --help for usage)");
  registerServe(program);
  registerHost(program);
  registerVm(program);
  registerConfig(program);
  registerLogs(program);
  return program;
}

export async function main(argv = process.argv) {
  const program = buildProgram();
  program.exitOverride();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) process.exit(err.exitCode);
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`hangar: ${message}\n`);
    process.exit(1);
  }
}
