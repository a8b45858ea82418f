/** What the registry says of parameters it refuses (and of results that break their schema). */
import type { z } from "zod";
import { closest, issueSentences } from "../../common/zod-messages.js";
import type { AnyCommand } from "./command.js";

/** `Unknown parameter 'coordinate' for left_click (did you mean 'x'?); it takes: x, y, modifiers` */
export function unknownParamsMessage(def: AnyCommand, keys: readonly string[]): string {
  const known = Object.keys(def.params.shape);
  const named = keys.slice(0, 5).map((key) => {
    const near = closest(key, known);
    return `'${key.slice(0, 80)}'${near ? ` (did you mean '${near}'?)` : ""}`;
  });
  const takes = known.length > 0 ? `it takes: ${known.join(", ")}` : "it takes no parameters";
  return `Invalid params: unknown parameter${keys.length > 1 ? "s" : ""} ${named.join(", ")} for ${def.name}; ${takes}`;
}

/** `Invalid params: x: expected number, received string; y: required` */
export function describeZodError(error: z.ZodError): string {
  return `Invalid params: ${issueSentences(error, { whole: "params", most: 5 }).join("; ")}`;
}
