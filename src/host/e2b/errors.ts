/**
 * Failures as E2B's API answers them: `{"code", "message"}` with the same HTTP status, so that the
 * `e2b` SDK raises its own classes (401 AuthenticationError, 404 NotFoundError or
 * SandboxNotFoundError, 409 a pause of a paused sandbox, 429 RateLimitError, 503 ServiceBusyError,
 * other codes a SandboxError that carries the status). The host service's own failures
 * (`HostError`) are given the status of their kind here, in one place.
 */
import { HostError, type HostErrorKind } from "../errors.js";

export class E2bError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = "E2bError";
  }
}

/** E2B's message for a sandbox it cannot find (any sandbox of another team reads the same). */
export function sandboxNotFound(sandboxID: string): E2bError {
  return new E2bError(404, `Sandbox "${sandboxID}" doesn't exist or you don't have access to it`);
}

const STATUS_OF: Record<HostErrorKind, number> = {
  invalid_params: 400,
  not_found: 404,
  not_supported: 400,
  cancelled: 400,
  failed: 500,
  unavailable: 503,
  exhausted: 503,
  conflict: 409,
};

/** The E2B answer to any failure: an `E2bError` as it is, a `HostError` by its kind, else a 500. */
export function e2bAnswer(err: unknown): { code: number; message: string } {
  if (err instanceof E2bError) return { code: err.code, message: err.message };
  if (err instanceof HostError) return { code: STATUS_OF[err.kind], message: err.message };
  return { code: 500, message: `Internal error: ${(err as Error).message}` };
}
