/**
 * Messages about values a zod schema refused, worded alike by both programs: one sentence per
 * problem naming the field, and the known name nearest to a misspelt one.
 */
import type { z } from "zod";

export interface IssueWording {
  /** What the value as a whole is called (`params`, `body`). */
  whole: string;
  /** The value that was checked: a missing field is then said to be required. */
  input?: unknown;
  /** At most this many sentences. */
  most?: number;
}

/** `x: expected number, received string`, `cpu is required`: one sentence per issue. */
export function issueSentences(error: z.ZodError, wording: IssueWording): string[] {
  const issues = wording.most === undefined ? error.issues : error.issues.slice(0, wording.most);
  return issues.map((issue) => {
    const field = issue.path.length > 0 ? issue.path.join(".") : wording.whole;
    if (
      "input" in wording &&
      issue.code === "invalid_type" &&
      valueAt(wording.input, issue.path) === undefined
    ) {
      return `${field} is required`;
    }
    return `${field}: ${issue.message}`;
  });
}

function valueAt(input: unknown, path: PropertyKey[]): unknown {
  let value = input;
  for (const key of path) value = (value as Record<PropertyKey, unknown> | undefined)?.[key];
  return value;
}

/** The known name nearest to `name` (case-insensitive edit distance at most a third of its length). */
export function closest(name: string, known: readonly string[]): string | undefined {
  const wanted = name.toLowerCase();
  let best: { name: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(wanted, candidate.toLowerCase());
    if (distance <= Math.max(1, Math.floor(candidate.length / 3)) && (!best || distance < best.distance)) {
      best = { name: candidate, distance };
    }
  }
  return best?.name;
}

function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 3) return 99;
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j] + 1,
        current[j - 1] + 1,
        previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length];
}
