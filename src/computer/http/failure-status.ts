/**
 * The HTTP status of a `CommandError`, for the transports that answer over HTTP (`/files`,
 * OSWorld's routes, envd's files): the OS error behind it first (a missing file is 404, a refused
 * one 403, a full disk 507), else its code.
 */
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { CommandError, ErrorCode } from "../../common/errors.js";

/** The HTTP status of an OS error of a file transfer. */
const STATUS_OF_ERRNO: Record<string, ContentfulStatusCode> = {
  ENOENT: 404,
  EACCES: 403,
  EPERM: 403,
  EISDIR: 400,
  ENOTDIR: 400,
  ENAMETOOLONG: 400,
  ELOOP: 400,
  ENOSPC: 507,
  EDQUOT: 507,
};

const STATUS_OF_CODE: Partial<Record<ErrorCode, ContentfulStatusCode>> = {
  invalid_params: 400,
  not_found: 404,
  too_large: 413,
  out_of_range: 416,
};

export function httpStatusOf(err: CommandError): ContentfulStatusCode {
  const errno = (err.cause as NodeJS.ErrnoException | undefined)?.code ?? "";
  return STATUS_OF_ERRNO[errno] ?? STATUS_OF_CODE[err.code] ?? 500;
}
