/** The client's error, and how a reply becomes a result or that error. */
import type { ErrorCode } from "../common/errors.js";

/** A failed call: the server's `code` (`invalid_params`, `timeout`, …) or the client's own. */
export type HangarErrorCode = ErrorCode | "http" | "network";

export class HangarError extends Error {
  constructor(
    readonly code: HangarErrorCode,
    message: string,
    /** The failure's other fields (e.g. `return_code`), or `status` for `http`. */
    readonly fields: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "HangarError";
  }
}

/** The result of a reply event, or the `HangarError` of a failed one. */
export function resultOf(name: string, event: Record<string, unknown>, result: unknown): unknown {
  if (event.success === true) return result;
  const { success: _s, error, code, ...fields } = event;
  throw new HangarError((code as HangarErrorCode) ?? "failed", String(error ?? `${name} failed`), fields);
}
