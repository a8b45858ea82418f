/** The `Range` header of a file download (`/files`, envd's `GET /files`). */
import { CommandError } from "../../common/errors.js";

/**
 * One byte range (`bytes=a-b`, `bytes=a-`, `bytes=-n`), or undefined for the whole file (no header,
 * several ranges, or another unit: RFC 9110 lets a server ignore those). Throws `out_of_range` (with
 * the file's `size`) when the range lies outside the file.
 */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | undefined {
  if (!header) return undefined;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === "" && match[2] === "")) return undefined;
  let start: number;
  let end: number;
  if (match[1] === "") {
    start = Math.max(0, size - Number(match[2]));
    end = size - 1;
    if (Number(match[2]) === 0) start = size;
  } else {
    start = Number(match[1]);
    end = match[2] === "" ? size - 1 : Math.min(Number(match[2]), size - 1);
    if (match[2] !== "" && Number(match[2]) < start) return undefined;
  }
  if (start >= size) {
    throw new CommandError("out_of_range", `Range not satisfiable: the file has ${size} bytes`, { size });
  }
  return { start, end };
}
