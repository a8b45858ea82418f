/** `hangar host serve`: the VM host service (/svc API, QEMU). */
import type { Command } from "commander";
import { createLogger } from "../common/logger.js";
import { DEFAULT_HOST_PORT } from "../host/port.js";
import { HOST_TOKEN_ENV, readTokenFile } from "./host-client.js";
import { browserAccess, browserAccessOptions, logLevelOption, onShutdown, parsePort } from "./util.js";

export function registerHost(program: Command) {
  const host = program.command("host").description("The VM host service: runs and manages VMs with QEMU");
  const serve = host
    .command("serve")
    .description("Start the host service API (/svc/...) that creates, runs and stops VMs")
    .option("--host <address>", "address to listen on (keep loopback unless you mean it)", "127.0.0.1")
    .option("--port <port>", "port to listen on", parsePort, DEFAULT_HOST_PORT)
    .addOption(logLevelOption("info"))
    .option("--stop-grace <seconds>", "how long stop waits for the guest to power down", "10")
    .option(
      "--token-file <path>",
      `require Authorization: Bearer <the token in this file> on every request (also $${HOST_TOKEN_ENV})`,
    )
    .option("--no-auth", "allow listening beyond loopback without a token (anyone who connects manages VMs)");
  browserAccessOptions(serve).action(async (opts) => {
    const log = createLogger({ level: opts.logLevel, name: "host" });
    const grace = Number(opts.stopGrace);
    if (!Number.isFinite(grace) || grace < 0) throw new Error("--stop-grace: expected a number of seconds");
    const token = opts.tokenFile ? readTokenFile(opts.tokenFile) : process.env[HOST_TOKEN_ENV] || undefined;
    // QEMU and the other children have no use for it.
    delete process.env[HOST_TOKEN_ENV];
    // Loaded here so that the other commands do not carry the host service in memory.
    const { startHostService } = await import("../host/server.js");
    const server = await startHostService({
      host: opts.host,
      port: opts.port,
      log,
      stopGraceMs: grace * 1000,
      token,
      noAuth: !opts.auth,
      ...browserAccess(opts),
    });
    log.info(
      { url: server.url, settings: server.services.settings.file, auth: token ? "token" : "none" },
      "host service listening",
    );
    process.stdout.write(
      `Hangar host service on ${server.url} (${token ? "token required" : "no token"}; ` +
        `settings ${server.services.settings.file})\n`,
    );
    onShutdown(async () => {
      log.info("shutting down (running VMs keep running)");
      await server.close();
    });
  });
}
