/** The client's types, derived from the commands' zod definitions (imported as types only). */
import type { z } from "zod";
import type { CommandDefinitions } from "../../commands/index.js";

export type CommandName = CommandDefinitions["name"];
type Definition<N extends CommandName> = Extract<CommandDefinitions, { readonly name: N }>;
/** What a command takes, as its caller writes it (defaults optional). */
export type CommandParams<N extends CommandName> = z.input<Definition<N>["params"]>;
/** What a command returns. */
export type CommandResult<N extends CommandName> = z.output<Definition<N>["result"]>;
