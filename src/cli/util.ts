/** Small helpers the CLI commands share. */
import { type Command, InvalidArgumentError, Option } from "commander";
import type { Logger } from "../common/logger.js";
import { listFrom, normalizeHostName, normalizeOrigin } from "../common/origin-policy.js";

/** A command line that cannot be run as written: `hangar` says why and exits 2, as for commander's own. */
export class UsageError extends Error {}

export function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new InvalidArgumentError("expected a port number from 0 to 65535");
  }
  return port;
}

const cleanups: (() => Promise<void>)[] = [];

/**
 * Runs `cleanup` once on SIGINT/SIGTERM, then exits. Cleanups registered by several owners in one
 * process (the container's entry point, then the server it runs) run one after another, the last
 * registered first, so that what was started last stops first.
 */
export function onShutdown(cleanup: () => Promise<void>) {
  cleanups.push(cleanup);
  if (cleanups.length > 1) return;
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    try {
      for (const each of cleanups.reverse()) await each().catch(() => undefined);
    } finally {
      process.exit(0);
    }
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

/** `--allow-origin` and `--allow-host`, repeatable, for both servers (see common/origin-policy.ts). */
export function browserAccessOptions(command: Command): Command {
  return command
    .option(
      "--allow-origin <url>",
      "let web pages of this origin use the server, e.g. http://localhost:3000 (repeatable; also " +
        "$HANGAR_ALLOW_ORIGINS, comma separated); '*' only with authentication",
      collectChecked(normalizeOriginFlag),
    )
    .option(
      "--allow-host <name>",
      "accept this name in the Host header besides localhost and loopback addresses (repeatable; " +
        "also $HANGAR_ALLOW_HOSTS)",
      collectChecked(normalizeHostName),
    );
}

/** The origins and hosts of `browserAccessOptions`, flags added to the environment's lists. */
export function browserAccess(
  opts: { allowOrigin?: string[]; allowHost?: string[] },
  env: NodeJS.ProcessEnv = process.env,
) {
  return {
    allowOrigins: listFrom(opts.allowOrigin, env.HANGAR_ALLOW_ORIGINS).map(normalizeOriginFlag),
    allowHosts: listFrom(opts.allowHost, env.HANGAR_ALLOW_HOSTS).map(normalizeHostName),
  };
}

function normalizeOriginFlag(value: string): string {
  return value === "*" ? value : normalizeOrigin(value);
}

/** A commander parser that checks each value and collects repeated ones. */
function collectChecked(check: (value: string) => string) {
  return (value: string, previous: string[] | undefined) => {
    try {
      return [...(previous ?? []), check(value)];
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
  };
}

/** `--log-level`, checked against the levels that exist. */
export function logLevelOption(defaultLevel: string): Option {
  return new Option("--log-level <level>", "how much to log")
    .choices(["trace", "debug", "info", "warn", "error", "fatal", "silent"])
    .default(defaultLevel);
}

/**
 * A long-running server must not die of one stray error: an 'error' event or a rejection that no
 * code handles (a library's socket, say) is logged and the server goes on. The causes are fixed
 * where they are found; this is the net under them.
 */
export function keepServingThroughStrayErrors(log: Logger) {
  process.on("uncaughtException", (err) => log.error({ err }, "uncaught error; still serving"));
  process.on("unhandledRejection", (err) => log.error({ err }, "unhandled rejection; still serving"));
}
