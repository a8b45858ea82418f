/** `hangar mcp`: the computer server's commands as MCP tools over stdin/stdout, for desktop agents. */
import type { Command } from "commander";
import { allCommands } from "../../commands/index.js";
import { createLogger } from "../common/logger.js";
import { releaseYoungGeneration } from "../common/young-generation.js";
import { CommandRegistry } from "../computer/core/registry.js";
import { defaultAccessibility, resultsCheckedByEnv } from "../computer/server.js";
import { startDesktopSession } from "../desktop/session.js";
import { logLevelOption, onShutdown } from "./util.js";

export function registerMcp(program: Command) {
  program
    .command("mcp")
    .description(
      "Serve the computer server's commands as Model Context Protocol tools over stdio (this desktop, or a " +
        "virtual one when DISPLAY is unset)",
    )
    .addOption(logLevelOption("warn"))
    .action(async (opts) => {
      // stdout carries the protocol: the logger writes to stderr only.
      const log = createLogger({ level: opts.logLevel, name: "mcp", destination: 2 });
      const desktop = await startDesktopSession({ log });
      const accessibility = defaultAccessibility();
      const registry = new CommandRegistry(allCommands, {
        desktop: desktop.manager.provider,
        accessibility,
        log,
        checkResults: resultsCheckedByEnv(),
      });
      const cleanup = async () => {
        accessibility?.close();
        await desktop.stop();
      };
      onShutdown(cleanup);
      try {
        const { serveMcpStdio } = await import("../computer/transports/mcp/mcp.js");
        // Loaded; the action returns only when the client goes away.
        releaseYoungGeneration();
        await serveMcpStdio(registry, log);
      } finally {
        await cleanup();
      }
    });
}
