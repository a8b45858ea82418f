/**
 * The one logger of both programs: pino, one JSON line per event on stderr. Never log a parameter's
 * content, a key or a password; the redact list below is a second line of defence.
 */
import { pino } from "pino";

export type Logger = pino.Logger;

export function createLogger(options: { level?: string; name?: string; destination?: number | string } = {}) {
  return pino(
    {
      name: options.name ?? "hangar",
      level: options.level ?? process.env.HANGAR_LOG_LEVEL ?? "info",
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          "apiKey",
          "api_key",
          "password",
          "token",
          "headers.authorization",
          'headers["x-api-key"]',
          "*.apiKey",
          "*.password",
        ],
        censor: "[redacted]",
      },
    },
    gatheredDestination(options.destination ?? 2),
  );
}

/** A line waits at most this long in the destination's buffer. */
const FLUSH_MS = 250;

/**
 * Lines are gathered into writes of 4 KiB, and written at most a quarter second after they were
 * logged: one write per command was a tenth of a small command's time. The quarter-second flush is
 * armed by a line, not kept running: sonic-boom's own (`periodicFlush`) wrote an empty buffer
 * through the thread pool four times a second for ever, waking an idle server (in a guest under
 * emulation, a visible part of its idle CPU). Pino writes what is left when the process exits.
 */
function gatheredDestination(dest: number | string) {
  const destination = pino.destination({ dest, sync: false, minLength: 4096 });
  const write = destination.write.bind(destination);
  let armed: NodeJS.Timeout | undefined;
  const flush = () => {
    armed = undefined;
    try {
      destination.flush();
    } catch {
      // Ended meanwhile (the process is exiting): pino wrote what was left.
    }
  };
  destination.write = (line: string) => {
    const written = write(line);
    if (!armed) armed = setTimeout(flush, FLUSH_MS).unref();
    return written;
  };
  return destination;
}

/** A logger that writes nothing: the default for tests and embedded use. */
export const silentLogger: Logger = pino({ level: "silent" });
