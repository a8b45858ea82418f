/** Small helpers the CLI commands share. */
import { InvalidArgumentError } from "commander";

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
