/** The `hangar` command line: one program, a module per group of commands. */
import { Command, CommanderError } from "commander";
import { forgetMemorySettings } from "../common/memory-env.js";
import { PACKAGE_VERSION } from "../common/version.js";
import { registerConfig, registerLogs } from "./config.js";
import { registerHost } from "./host.js";
import { registerImageCommands } from "./images.js";
import { followLauncher } from "./launcher.js";
import { registerMcp } from "./mcp.js";
import { registerPool } from "./pool.js";
import { registerServe } from "./serve.js";
import { UsageError } from "./util.js";
import { registerVm } from "./vm.js";

export function buildProgram(): Command {
  const program = new Command("hangar")
    .description("Computers for AI agents: the computer server (serve) and the VM host service (host serve)")
    .version(PACKAGE_VERSION)
    .showHelpAfterError("(run with --help for usage)")
    // Before the subcommands are added, so that they inherit it: main() decides every exit code.
    .exitOverride();
  registerServe(program);
  registerMcp(program);
  registerHost(program);
  registerVm(program);
  registerImageCommands(program.commands.find((c) => c.name() === "vm")!);
  registerPool(program);
  registerConfig(program);
  registerLogs(program);
  return program;
}

export async function main(argv = process.argv) {
  followLauncher();
  forgetMemorySettings();
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    // Help and version exit 0; every other commander error is a usage error, as is a UsageError.
    if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`hangar: ${message}\n`);
    process.exit(err instanceof UsageError ? 2 : 1);
  }
}
