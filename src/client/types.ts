/** The client's types, derived from the commands' zod definitions (imported as types only). */
import type { z } from "zod";
import type { CommandDefinitions } from "../../commands/index.js";

export type CommandName = CommandDefinitions["name"];
type Definition<N extends CommandName> = Extract<CommandDefinitions, { readonly name: N }>;
/** What a command takes, as its caller writes it (defaults optional). */
export type CommandParams<N extends CommandName> = z.input<Definition<N>["params"]>;
/**
 * What a command returns, as clients receive it: its result as JSON carries it (the server's bytes,
 * for one, arrive as their base64 text).
 */
export type CommandResult<N extends CommandName> = AsJson<z.output<Definition<N>["result"]>>;

/** A value as `JSON.stringify` gives it: whatever has `toJSON` becomes what that returns. */
type AsJson<T> = T extends { toJSON(): infer J }
  ? J
  : T extends object
    ? { [K in keyof T]: AsJson<T[K]> }
    : T;
