/**
 * A command frame, `{"command": name, "params": {...}}`, as `/cmd`, `/playwright_exec` and `/ws`
 * receive it: one parser, one set of messages, whatever carried the JSON.
 */
export type CommandFrame = { command: string; params: unknown };

/** The frame in a parsed JSON value, or what is wrong with it (an HTTP body's, or a message's). */
export function parseCommandFrame(
  value: unknown,
  carrier: "body" | "message",
): CommandFrame | { error: string } {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    const what =
      carrier === "body"
        ? "Invalid JSON body: expected an object"
        : "Invalid message: expected a JSON object";
    return { error: `${what} {"command": ..., "params": {...}}` };
  }
  const { command, params } = value as { command?: unknown; params?: unknown };
  if (typeof command !== "string" || command.length === 0) return { error: "Command is required" };
  return { command, params };
}
