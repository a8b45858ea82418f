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
    // Lines are gathered into writes of 4 KiB, and at least every quarter second: one write per
    // command was a tenth of a small command's time. Pino writes what is left when the process exits.
    pino.destination({ dest: options.destination ?? 2, sync: false, minLength: 4096, periodicFlush: 250 }),
  );
}

/** A logger that writes nothing: the default for tests and embedded use. */
export const silentLogger: Logger = pino({ level: "silent" });
