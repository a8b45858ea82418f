/**
 * The failures the computer server reports, in one vocabulary. A handler throws a `CommandError`;
 * the registry turns it into the failure envelope `{"success": false, "error", "code", ...fields}`.
 * Transports throw it too, and each maps it to its wire in one place (`http/failure-status.ts` for
 * HTTP statuses).
 */
export type ErrorCode =
  | "invalid_params"
  | "unknown_command"
  | "not_supported"
  | "not_found"
  | "timeout"
  | "unavailable"
  | "cancelled"
  | "failed"
  | "internal"
  /** Another holds control of the desktop (see computer/core/control.ts). */
  | "paused"
  /** The request contradicts the current state (control taken twice, handed back by a non-holder). */
  | "conflict"
  /** A body or a file is larger than the limit allows. */
  | "too_large"
  /** A byte range lies outside the file (`fields.size` says how large it is). */
  | "out_of_range";

export class CommandError extends Error {
  /**
   * @param code machine-readable reason
   * @param message what a person can act on
   * @param fields extra fields the reference puts on its failure replies (e.g. `return_code`)
   * @param cause the error behind it (an OS error, whose `code` a transport may map), not sent
   */
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly fields: Record<string, unknown> = {},
    cause?: unknown,
  ) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "CommandError";
  }
}

const RESOURCE_NAMES: Record<string, string> = {
  EMFILE: "too many open files in the server",
  ENFILE: "too many open files in the system",
  ENOMEM: "not enough memory",
  EAGAIN: "too many processes",
};

/** What kind of thing a path is, for messages (`a FIFO`, `a character device`, …). */
export function fileKind(info: {
  isFIFO(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isSocket(): boolean;
  isDirectory(): boolean;
}): string {
  if (info.isFIFO()) return "a FIFO";
  if (info.isCharacterDevice()) return "a character device";
  if (info.isBlockDevice()) return "a block device";
  if (info.isSocket()) return "a socket";
  if (info.isDirectory()) return "a directory";
  return "not a file";
}

/** Refuses what is not a regular file where one is needed: reading a FIFO or a device could wait forever. */
export function notRegularFile(kind: string, path: string): CommandError {
  return new CommandError(
    "failed",
    `Not a regular file (${kind}): ${path}; only regular files can be read or appended to`,
  );
}

/** Maps Node's file-system error codes to messages that name the path and the reason. */
export function describeOsError(err: unknown, path?: string): CommandError {
  const e = err as NodeJS.ErrnoException;
  const where = path ? `: ${path}` : "";
  const fail = (code: ErrorCode, message: string) => new CommandError(code, message, {}, err);
  switch (e?.code) {
    case "ENOENT":
      return fail("not_found", `No such file or directory${where}`);
    case "EISDIR":
      return fail("failed", `Is a directory${where}`);
    case "ENOTDIR":
      return fail("failed", `Not a directory${where}`);
    case "EACCES":
    case "EPERM":
      return fail("failed", `Permission denied${where}`);
    case "EEXIST":
      return fail("failed", `Already exists${where}`);
    case "ENOTEMPTY":
      return fail("failed", `Directory not empty${where}`);
    case "ENOSPC":
      return fail("failed", `No space left on device${where}`);
    case "EROFS":
      return fail("failed", `Read-only file system${where}`);
    case "EMFILE":
    case "ENFILE":
    case "ENOMEM":
    case "EAGAIN":
      return fail(
        "unavailable",
        `The system is out of resources (${e.code}: ${RESOURCE_NAMES[e.code]})${where}; try again later`,
      );
    case "E2BIG":
      return fail("invalid_params", `Invalid params: too long for the system (E2BIG)${where}`);
    default:
      if (err instanceof CommandError) return err;
      return fail("failed", `${e?.message ?? String(err)}`);
  }
}

/**
 * The system error code behind a failed `fetch` (`ECONNREFUSED`, `ENOTFOUND`, …), which undici
 * hides in `cause`, sometimes inside an AggregateError; otherwise the cause's message.
 */
export function fetchFailure(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string; errors?: { code?: string }[] } }).cause;
  const code = cause?.code ?? cause?.errors?.find((e) => e.code)?.code;
  if (code) return code;
  const inMessage = /\b(E[A-Z]{4,})\b/.exec(cause?.message ?? "")?.[1];
  return inMessage ?? cause?.message ?? (err as Error).message;
}
