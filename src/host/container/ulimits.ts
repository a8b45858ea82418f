/** `--container-ulimit nofile=10000:10000` (or `nofile=10000`, soft and hard alike), as Docker's `--ulimit`. */
import type { Ulimit } from "./container-runtime.js";

const NAMES = new Set([
  "core",
  "cpu",
  "data",
  "fsize",
  "locks",
  "memlock",
  "msgqueue",
  "nice",
  "nofile",
  "nproc",
  "rss",
  "rtprio",
  "rttime",
  "sigpending",
  "stack",
]);

export function parseUlimit(text: string): Ulimit {
  const match = /^([a-z]+)=(-?\d+)(?::(-?\d+))?$/.exec(text.trim());
  if (!match || !NAMES.has(match[1])) {
    throw new Error(
      `invalid ulimit '${text}': expected NAME=SOFT[:HARD], e.g. nofile=10000:10000 (names: ${[...NAMES].join(", ")})`,
    );
  }
  const soft = Number(match[2]);
  const hard = match[3] === undefined ? soft : Number(match[3]);
  if (hard !== -1 && soft > hard)
    throw new Error(`invalid ulimit '${text}': the soft limit is above the hard one`);
  return { name: match[1], soft, hard };
}
