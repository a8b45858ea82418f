/** The result of running one command, before a transport frames it. */
import type { ErrorCode } from "../../common/errors.js";
import { Bytes } from "./bytes.js";

/** `R`: the result's type, where the command is known (`ctx.run` given a definition). */
export type Outcome<R = unknown> =
  | { readonly success: true; readonly result: R }
  | {
      readonly success: false;
      readonly error: string;
      readonly code: ErrorCode;
      /** Extra fields the reference puts on this failure (e.g. `stdout`, `return_code`). */
      readonly fields: Readonly<Record<string, unknown>>;
    };

export function failure(
  code: ErrorCode,
  error: string,
  fields: Record<string, unknown> = {},
): Outcome<never> {
  return { success: false, error, code, fields };
}

/** A result that is an object of fields (not an array, nor bytes). */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    !Buffer.isBuffer(value) &&
    !(value instanceof Bytes)
  );
}

/**
 * cua's reply shape `{"success": true, ...result}` (a non-object result becomes `content`): what `/ws`,
 * `/playwright_exec` and each step of `batch` answer.
 */
export function cuaReply(outcome: Outcome): Record<string, unknown> {
  if (!outcome.success) return failureEnvelope(outcome);
  const { result } = outcome;
  if (!isPlainObject(result)) return { success: true, content: result ?? null };
  const { success: _s, ...fields } = result;
  return { success: true, ...fields };
}

/** A failure as every framing shows it: `{success: false, error, code, ...fields}`. */
export function failureEnvelope(outcome: Extract<Outcome, { success: false }>): Record<string, unknown> {
  return { success: false, error: outcome.error, code: outcome.code, ...outcome.fields };
}
