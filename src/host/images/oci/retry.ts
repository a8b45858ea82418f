/** Retries with exponential backoff and jitter, for network errors and a registry's 5xx/429. */
import { setTimeout as sleep } from "node:timers/promises";
import { HostError } from "../../errors.js";

export interface RetryOptions {
  /** Attempts in all, the first included (default 5). */
  attempts?: number;
  /** The first delay in ms (default 500); it doubles each time, plus up to 50% jitter. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  signal?: AbortSignal;
  /** Called before each retry with the error and the delay. */
  onRetry?: (error: unknown, attempt: number, delayMs: number) => void;
}

/** An error worth another try: carries the server's Retry-After when it sent one. */
export class TransientError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = "TransientError";
  }
}

/** Network failures from fetch or a socket, and TransientError, are retried; nothing else. */
export function isTransient(error: unknown): boolean {
  if (error instanceof TransientError) return true;
  if (error instanceof HostError) return false;
  const e = error as { name?: string; code?: string; cause?: { code?: string } };
  if (e?.name === "AbortError") return false;
  const code = e?.code ?? e?.cause?.code;
  if (
    code &&
    /^(ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|EAI_AGAIN|UND_ERR_.*|ERR_STREAM_PREMATURE_CLOSE)$/.test(code)
  ) {
    return true;
  }
  return error instanceof TypeError && /fetch failed|terminated/i.test(error.message);
}

export async function withRetry<T>(
  fn: (attempt: number) => Promise<T>,
  options: RetryOptions = {},
): Promise<T> {
  const attempts = options.attempts ?? 5;
  const base = options.baseDelayMs ?? 500;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (error) {
      if (options.signal?.aborted) throw cancelled(options.signal);
      if (attempt >= attempts || !isTransient(error)) throw error;
      const backoff = Math.min(options.maxDelayMs ?? 30_000, base * 2 ** (attempt - 1));
      const hinted = error instanceof TransientError ? error.retryAfterMs : undefined;
      const delay = Math.round(hinted ?? backoff * (1 + Math.random() * 0.5));
      options.onRetry?.(error, attempt, delay);
      await sleep(delay, undefined, { signal: options.signal }).catch(() => {
        throw cancelled(options.signal);
      });
    }
  }
}

export function cancelled(signal?: AbortSignal): HostError {
  const reason = signal?.reason;
  if (reason instanceof HostError) return reason;
  return new HostError("cancelled", "The transfer was cancelled");
}
