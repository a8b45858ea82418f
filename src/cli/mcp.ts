/** `hangar mcp`: the computer server's commands as MCP tools over stdin/stdout, for desktop agents. */
import type { Command } from "commander";
import { allCommands } from "../../commands/index.js";
import { createLogger } from "../common/logger.js";
import { serveMcpStdio } from "../computer/mcp.js";
import { CommandRegistry } from "../computer/registry.js";
import { defaultAccessibility } from "../computer/server.js";

export function registerMcp(program: Command) {
  program
    .command("mcp")
    .description("Serve the computer server's commands as Model Context Protocol tools over stdio")
    .option("--log-level <level>", "debug, info, warn or error (logs go to stderr)", "warn")
    .action(async (opts) => {
      // stdout carries the protocol: the logger writes to stderr only.
      const log = createLogger({ level: opts.logLevel, name: "mcp", destination: 2 });
      const accessibility = defaultAccessibility();
      const registry = new CommandRegistry(allCommands, { accessibility, log });
      await serveMcpStdio(registry, log);
      accessibility?.close();
    });
}
