/** Small helpers the CLI commands share. */
import { InvalidArgumentError } from "commander";

/** A command line that cannot be run as written: `hangar` says why and exits 2, as for commander's own. */
export class UsageError extends Error {}

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
