/**
 * What a command is: one definition holding its name, aliases, parameter schema, result shape and
 * handler. Everything else (validation, `/commands`, OpenAPI, MCP) is generated from it.
 *
 * @example
 * export const version = defineCommand({
 *   name: "version",
 *   description: "Protocol and package version",
 *   params: z.object({}),
 *   result: z.object({ protocol: z.number(), package: z.string() }),
 *   handler: async () => ({ protocol: 1, package: "0.1.0" }),
 * });
 */

import type { z } from "zod";
import type { BrowserSession } from "../../browser/session.js";
import type { FileSystem } from "../../common/file-system.js";
import type { Logger } from "../../common/logger.js";
import type { AccessibilityBackend } from "../../desktop/accessibility.js";
import type { DesktopBackend } from "../../desktop/backend.js";
import type { Recordings } from "../../desktop/recording/recordings.js";
import type { CommandUser } from "../../os/command-user.js";
import type { WarmShells } from "../../os/warm-shells.js";
import type { ControlLease } from "./control.js";
import type { CommandFlags } from "./flags.js";
import type { Outcome } from "./outcome.js";
import type { Trajectories } from "./trajectories/trajectories.js";

export interface CommandContext {
  /** Aborted when the deadline passes or the client goes away; long handlers must honour it. */
  readonly signal: AbortSignal;
  /** The desktop backend; throws `CommandError("unavailable")` when there is no display. */
  desktop(): Promise<DesktopBackend>;
  /** The accessibility tree and its actions; throws `CommandError("unavailable")` saying what is missing. */
  accessibility(): Promise<AccessibilityBackend>;
  /** The browser driven by DOM commands; throws `CommandError("unavailable")` when there is none. */
  browser(): Promise<BrowserSession>;
  /** Shells kept waiting for `run_command`; undefined where each command spawns its own. */
  readonly shells?: WarmShells;
  /** The user the processes commands start run as (`--command-user`); undefined: the server's. */
  readonly commandUser?: CommandUser;
  /** The file system as the desktop's user sees it: the command user's when there is one. */
  readonly files: FileSystem;
  /** Video recordings of the desktop; undefined where the server records none. */
  readonly recordings?: Recordings;
  /** Trajectories of every command (`start_trajectory`); undefined where the server writes none. */
  readonly trajectories?: Trajectories;
  /**
   * Runs another command through the registry (validation, queue and deadline included). Given its
   * definition rather than its name, the parameters are type-checked and the result is typed.
   */
  run(name: string, params: unknown): Promise<Outcome>;
  run<S extends AnyParams, R>(command: CommandDefinition<S, R>, params: z.input<S>): Promise<Outcome<R>>;
  /**
   * Sends an intermediate result to the client before the final one, for transports that can stream
   * (`/cmd`). Undefined where the transport answers exactly once per request.
   */
  readonly emit?: (content: unknown) => void;
  /**
   * The client's connection (a `/ws` socket, an MCP session, a kept-alive HTTP connection), for the
   * little a command remembers per client; undefined when the transport has none.
   */
  readonly connection?: object;
  /** Who drives the desktop (`request_help` waits on it); undefined where the server has no lease. */
  readonly control?: ControlLease;
  readonly log: Logger;
}

// biome-ignore lint/suspicious/noExplicitAny: the registry holds definitions of every parameter shape
export type AnyParams = z.ZodObject<any>;

export interface CommandDefinition<S extends AnyParams = AnyParams, R = unknown, N extends string = string>
  extends CommandFlags {
  /** Kept as its literal type, so that the typed client (`hangar/client`) names its methods from it. */
  readonly name: N;
  readonly aliases?: readonly string[];
  /** One or two sentences for `/commands`, OpenAPI and MCP tool descriptions. */
  readonly description: string;
  readonly params: S;
  /** The shape of a successful result (documentation and MCP output schema). */
  readonly result: z.ZodType<R>;
  /** Overrides the registry's default deadline, from the validated parameters. */
  readonly deadlineMs?: (params: z.output<S>) => number;
  readonly handler: (params: z.output<S>, ctx: CommandContext) => Promise<R> | R;
  /**
   * More MCP tools that run this command, each under its own name and parameters (a model's own
   * tool names, e.g. the members of Claude's computer toolset). MCP lists them beside the commands.
   */
  readonly tools?: readonly CommandTool[];
}

/** An MCP tool that runs a command: its arguments mapped onto the command's parameters. */
// biome-ignore lint/suspicious/noExplicitAny: the registry holds tools of every parameter shape
export interface CommandTool<S extends AnyParams = z.ZodObject<any>> {
  readonly name: string;
  readonly description: string;
  readonly params: S;
  /** The command's parameters for the tool's validated arguments. */
  toParams(args: z.output<S>): unknown;
  /** What the tool answers for the command's result; `isError` marks an answer that reports a failure. */
  answer?(result: unknown): { content: unknown; isError?: boolean };
}

/** Identity function that keeps the name, parameter and result types of a definition. */
export function defineCommand<S extends AnyParams, R, const N extends string>(
  def: CommandDefinition<S, R, N>,
): CommandDefinition<S, R, N> {
  return def;
}

/** A definition whose types have been erased, as the registry stores it. */
// biome-ignore lint/suspicious/noExplicitAny: erased for storage in one list
export type AnyCommand = CommandDefinition<AnyParams, any>;
