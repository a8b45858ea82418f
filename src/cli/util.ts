/** Small helpers the CLI commands share. */
import { InvalidArgumentError } from "commander";
import type { Logger } from "../common/logger.js";

export function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new InvalidArgumentError("expected a port number from 0 to 65535");
  }
  return port;
}

/** Runs `cleanup` once on SIGINT/SIGTERM, then exits. */
export function onShutdown(cleanup: () => Promise<void>) {
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    try {
      await cleanup();
    } finally {
      process.exit(0);
    }
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
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
