/**
 * The command registry: the one place that resolves aliases, validates parameters, applies the
 * deadline and the input queue, and turns thrown errors into failure outcomes. Transports call
 * `run()` and know no command by name.
 */

import { type BrowserProvider, noBrowser } from "../../browser/session.js";
import { abortError, CommandStop, raceAbort, type Stop, type StopSource } from "../../common/abort.js";
import { CommandError } from "../../common/errors.js";
import { type FileSystem, localFileSystem } from "../../common/file-system.js";
import { type Logger, silentLogger } from "../../common/logger.js";
import { isPromise } from "../../common/settled.js";
import { type AccessibilityProvider, noAccessibility } from "../../desktop/accessibility.js";
import { type DesktopProvider, noDesktop } from "../../desktop/backend.js";
import type { Recordings } from "../../desktop/recording/recordings.js";
import type { CommandUser } from "../../os/command-user.js";
import type { WarmShells } from "../../os/warm-shells.js";
import type { CommandRun } from "./activity.js";
import { isBase64Param } from "./bytes.js";
import type { AnyCommand, AnyParams, CommandContext, CommandDefinition, CommandTool } from "./command.js";
import type { ControlLease, Lease, WhenPaused } from "./control.js";
import { failure, type Outcome } from "./outcome.js";
import { describeZodError, unknownParamsMessage } from "./param-messages.js";
import type { Trajectories } from "./trajectories/trajectories.js";

export interface RegistryOptions {
  /** Where handlers get the desktop from; without one, desktop commands fail with `unavailable`. */
  desktop?: DesktopProvider;
  /** Where handlers get the accessibility tree from (AT-SPI on Linux). */
  accessibility?: AccessibilityProvider;
  /** Where the `browser_*` commands get the browser from. */
  browser?: BrowserProvider;
  /** Shells kept waiting for `run_command` (without them, each command spawns its shell). */
  shells?: WarmShells;
  /** The user the processes commands start run as (`--command-user`); default the server's. */
  commandUser?: CommandUser;
  /** The desktop user's file system (the command user's file worker); default this process's. */
  files?: FileSystem;
  /** Video recordings of the desktop (`start_recording`). */
  recordings?: Recordings;
  /** Trajectories of every command (`start_trajectory`). */
  trajectories?: Trajectories;
  log?: Logger;
  /**
   * Check every successful result against its command's `result` schema and fail the command when
   * it does not match (the composition roots turn it on under the tests, `HANGAR_CHECK_RESULTS=1`,
   * so that what `/commands`, the OpenAPI document and the typed client promise is what the
   * commands return). Off by default.
   */
  checkResults?: boolean;
  /** Deadline of a command that does not set its own (default 60 s). */
  defaultDeadlineMs?: number;
  /** Told of every finished command (the activity timeline, see activity.ts). */
  observe?: (run: CommandRun) => void;
  /** Who drives the desktop (control.ts): input commands of others wait or fail while it is held. */
  control?: ControlLease;
}

export interface RunOptions {
  /** Stopped (or aborted) when the client goes away. */
  signal?: StopSource;
  /** Where a streaming command sends intermediate results. */
  emit?: (content: unknown) => void;
  /** Which client ran it, for the activity timeline: "http", "ws", "mcp", "batch", … */
  transport?: string;
  /** The client's connection, for what commands remember per client (see CommandContext). */
  connection?: object;
  /** The lease of control this client holds (the console's person), if any. */
  holder?: Lease;
  /** What this client's input commands do while another holds control (default: wait). */
  whenPaused?: WhenPaused;
}

export class CommandRegistry {
  private readonly byName = new Map<string, AnyCommand>();
  private readonly aliasTable = new Map<string, string>();
  /** The MCP tools commands declare (`tools`), by name, with the command each runs. */
  private readonly toolTable = new Map<string, { def: AnyCommand; tool: CommandTool }>();
  private inputQueue: Promise<unknown> = Promise.resolve();
  private readonly desktop: DesktopProvider;
  private readonly accessibility: AccessibilityProvider;
  private readonly browser: BrowserProvider;
  private readonly shells?: WarmShells;
  private readonly recordings?: Recordings;
  private readonly trajectories?: Trajectories;
  private readonly log: Logger;
  private readonly defaultDeadlineMs: number;
  private readonly checkResults: boolean;
  private readonly observe?: (run: CommandRun) => void;
  private readonly control?: ControlLease;
  /** What every command's context hands out. */
  private readonly services: Services;
  /** Commands whose parameters, when none are sent, are `{}` (see `parseParams`). */
  private readonly takesNone = new Set<AnyCommand>();

  /** The file system as the desktop's user sees it (`--command-user`: its file worker), for file routes. */
  get files(): FileSystem {
    return this.services.files;
  }

  constructor(commands: readonly AnyCommand[], options: RegistryOptions = {}) {
    this.desktop = options.desktop ?? noDesktop;
    this.accessibility = options.accessibility ?? noAccessibility;
    this.browser = options.browser ?? noBrowser;
    this.shells = options.shells;
    this.recordings = options.recordings;
    this.trajectories = options.trajectories;
    this.log = options.log ?? silentLogger;
    this.defaultDeadlineMs = options.defaultDeadlineMs ?? 60_000;
    this.checkResults = options.checkResults ?? false;
    this.observe = options.observe;
    this.control = options.control;
    this.services = {
      desktop: this.desktop,
      accessibility: this.accessibility,
      browser: this.browser,
      shells: this.shells,
      commandUser: options.commandUser,
      files: options.files ?? localFileSystem,
      recordings: this.recordings,
      trajectories: this.trajectories,
      control: this.control,
      log: this.log,
    };
    for (const def of commands) {
      if (this.byName.has(def.name) || this.aliasTable.has(def.name)) {
        throw new Error(`Command defined twice: ${def.name}`);
      }
      // Strict: a parameter the command does not take is an error, not silently dropped.
      this.byName.set(def.name, { ...def, params: def.params.strict() });
    }
    for (const def of commands) {
      for (const alias of def.aliases ?? []) {
        if (this.byName.has(alias) || this.aliasTable.has(alias))
          throw new Error(`Alias defined twice: ${alias}`);
        this.aliasTable.set(alias, def.name);
      }
    }
    for (const def of commands) {
      for (const tool of def.tools ?? []) {
        if (this.byName.has(tool.name) || this.aliasTable.has(tool.name) || this.toolTable.has(tool.name))
          throw new Error(`Tool name defined twice: ${tool.name}`);
        this.toolTable.set(tool.name, { def, tool: { ...tool, params: tool.params.strict() } });
      }
    }
  }

  /** The MCP tools the commands declare besides themselves (`tools` of a definition). */
  get tools(): readonly CommandTool[] {
    return [...this.toolTable.values()].map((entry) => entry.tool);
  }

  /** Whether `name` is one of those tools (and not a command). */
  hasTool(name: string): boolean {
    return this.toolTable.has(name);
  }

  /**
   * Runs a tool a command declares: its arguments validated by the tool's schema, mapped onto the
   * command's parameters, and the command's result turned into the tool's answer.
   */
  async runTool(name: string, rawArgs: unknown, options: RunOptions = {}): Promise<Outcome> {
    const entry = this.toolTable.get(name);
    if (!entry) return failure("unknown_command", this.unknownCommandMessage(name));
    const parsed = entry.tool.params.safeParse(rawArgs ?? {});
    if (!parsed.success) return failure("invalid_params", describeZodError(parsed.error));
    const outcome = await this.run(entry.def.name, entry.tool.toParams(parsed.data), options);
    if (!outcome.success || !entry.tool.answer) return outcome;
    const answer = entry.tool.answer(outcome.result);
    if (answer.isError) return failure("failed", String(answer.content));
    return { success: true, result: answer.content };
  }

  /** Every definition, in registration order. */
  get commands(): readonly AnyCommand[] {
    return [...this.byName.values()];
  }

  /** `{alias: canonical}` for every alias. */
  get aliases(): Record<string, string> {
    return Object.fromEntries(this.aliasTable);
  }

  /** The definition a name or alias stands for. */
  resolve(name: string): AnyCommand | undefined {
    return this.byName.get(this.aliasTable.get(name) ?? name);
  }

  /**
   * Near names for an unknown command, as the reference picks them: every command then alias whose
   * lowercase form starts with the input's first two characters or contains the input; at most 5.
   */
  suggest(name: string): string[] {
    const wanted = name.toLowerCase();
    const prefix = wanted.slice(0, 2);
    return [...this.byName.keys(), ...this.aliasTable.keys()]
      .filter((candidate) => {
        const c = candidate.toLowerCase();
        return (prefix.length > 0 && c.startsWith(prefix)) || (wanted.length > 0 && c.includes(wanted));
      })
      .slice(0, 5);
  }

  /** Whether a command takes a parameter as bytes: the body reader then decodes its base64 text. */
  takesBytes(command: string, param: string): boolean {
    return isBase64Param(this.resolve(command)?.params.shape[param]);
  }

  /** `Unknown command: x. Did you mean: a, b?` */
  unknownCommandMessage(name: string): string {
    const suggestions = this.suggest(name);
    const shown = name.length > 80 ? `${name.slice(0, 80)}…` : name;
    return suggestions.length > 0
      ? `Unknown command: ${shown}. Did you mean: ${suggestions.join(", ")}?`
      : `Unknown command: ${shown}`;
  }

  /** Runs a command by name or alias with raw (unvalidated) parameters. Never throws. */
  run(name: string, rawParams: unknown, options: RunOptions = {}): Promise<Outcome> {
    const outcome = this.runNow(name, rawParams, options);
    return isPromise(outcome) ? outcome : Promise.resolve(outcome);
  }

  /**
   * `run`, with the outcome given at once (not as a promise) when the command answers at once: for
   * a transport that writes it then and there (`/cmd`). Never throws.
   */
  runNow(name: string, rawParams: unknown, options: RunOptions = {}): Outcome | Promise<Outcome> {
    const def = this.resolve(name);
    if (!def) return failure("unknown_command", this.unknownCommandMessage(name));
    const started = performance.now();
    const outcome = this.execute(def, rawParams, options);
    if (isPromise(outcome))
      return outcome.then((done) => this.finished(def, rawParams, options, started, done));
    return this.finished(def, rawParams, options, started, outcome);
  }

  /** Tells the observer and the log of a finished command. */
  private finished(
    def: AnyCommand,
    rawParams: unknown,
    options: RunOptions,
    started: number,
    outcome: Outcome,
  ) {
    const ms = performance.now() - started;
    try {
      this.observe?.({
        command: def.name,
        flags: def,
        params: rawParams,
        transport: options.transport ?? "api",
        ms,
        outcome,
      });
    } catch (err) {
      // What watches commands never costs one its answer.
      this.log.error({ err, command: def.name }, "recording the command failed");
    }
    // The line's fields are made only when it is written (the benchmarks and many servers log at warn).
    if (this.log.isLevelEnabled("info")) {
      this.log.info(
        {
          command: def.name,
          ms: Math.round(ms * 100) / 100,
          success: outcome.success,
          ...(outcome.success ? {} : { code: outcome.code }),
        },
        "command",
      );
    }
    return outcome;
  }

  /**
   * The outcome, at once when the handler answers at once (no promise is made on the way), else
   * when its work is done, cancelled or past its deadline.
   */
  private execute(def: AnyCommand, rawParams: unknown, options: RunOptions): Outcome | Promise<Outcome> {
    const parsed = this.parseParams(def, rawParams);
    if (!parsed.success) return failure("invalid_params", parsed.error);
    const params = parsed.data;

    const deadlineMs = def.deadlineMs?.(params) ?? this.defaultDeadlineMs;
    const stop = new CommandStop(deadlineMs, options.signal);
    if (stop.aborted) return toFailure(stop.reason, def.name, this.log);
    const ctx = new RunContext(this, this.services, stop, options);
    if (def.input) {
      // Waiting in the queue counts towards the deadline.
      stop.arm();
      const work = () => Promise.resolve().then(() => def.handler(params, ctx));
      return this.settle(def, stop, raceAbort(this.runInput(work, stop, options), stop));
    }
    let result: unknown;
    try {
      result = def.handler(params, ctx);
    } catch (err) {
      return toFailure(err, def.name, this.log);
    }
    // A handler that answers at once needs no deadline; one that has work under way gets it now.
    if (isPromise(result)) {
      stop.arm();
      return this.settle(def, stop, raceAbort(result, stop));
    }
    return this.succeeded(def, result);
  }

  private async settle(def: AnyCommand, stop: CommandStop, running: Promise<unknown>): Promise<Outcome> {
    try {
      return this.succeeded(def, await running);
    } catch (err) {
      return toFailure(err, def.name, this.log);
    } finally {
      stop.release();
    }
  }

  private succeeded(def: AnyCommand, result: unknown): Outcome {
    if (this.checkResults) {
      try {
        this.checkResult(def, result);
      } catch (err) {
        return toFailure(err, def.name, this.log);
      }
    }
    return { success: true, result };
  }

  /**
   * `parseParams`, remembering the commands that take no parameter: when one is sent none again,
   * its answer is the same empty object, and the schema is not run.
   */
  private parseParams(def: AnyCommand, raw: unknown) {
    const none = isEmpty(raw);
    if (none && this.takesNone.has(def)) return { success: true as const, data: {} };
    const parsed = parseParams(def, raw);
    if (none && parsed.success && isEmpty(parsed.data)) this.takesNone.add(def);
    return parsed;
  }

  /** Throws when a result is not what the command's `result` schema says it returns. */
  private checkResult(def: AnyCommand, result: unknown) {
    const checked = def.result.safeParse(result);
    if (!checked.success) {
      throw new Error(`its result does not match its result schema: ${describeZodError(checked.error)}`);
    }
  }

  /**
   * Input under the control lease: admitted (or made to wait, or refused) before it joins the queue,
   * and looked at again when it reaches the head: if control was taken meanwhile, it leaves the
   * queue without running and is admitted again.
   */
  private async runInput<T>(task: () => Promise<T>, stop: Stop, options: RunOptions): Promise<T> {
    const control = this.control;
    if (!control) return this.enqueueInput(task, stop);
    for (;;) {
      if (!control.allows(options.holder)) {
        await control.admit(options.holder, options.whenPaused ?? "queue", stop.signal);
      }
      const turn = await this.enqueueInput(
        async () => (control.allows(options.holder) ? { value: await task() } : undefined),
        stop,
      );
      if (turn) return turn.value;
    }
  }

  /**
   * Runs pointer and keyboard work one at a time, in arrival order. The next task starts when this
   * one has really stopped (a cancelled handler stops at its next step), not when its caller got
   * its answer; a handler that ignores its signal holds the queue at most `INPUT_STOP_GRACE_MS`.
   */
  private enqueueInput<T>(task: () => Promise<T>, stop: Stop): Promise<T> {
    const next = this.inputQueue.then(() => {
      if (stop.aborted) throw abortError(stop);
      return task();
    });
    this.inputQueue = stoppedOrGivenUp(next, stop);
    return next;
  }
}

type Services = Pick<
  RegistryOptions,
  | "desktop"
  | "accessibility"
  | "browser"
  | "shells"
  | "commandUser"
  | "recordings"
  | "trajectories"
  | "control"
> & {
  files: FileSystem;
  desktop: DesktopProvider;
  accessibility: AccessibilityProvider;
  browser: BrowserProvider;
  log: Logger;
};

/** A command's context: one object per command, its methods shared (made for every command). */
class RunContext implements CommandContext {
  constructor(
    private readonly registry: CommandRegistry,
    private readonly services: Services,
    private readonly stop: CommandStop,
    private readonly options: RunOptions,
  ) {}

  /** Made when the handler asks for it: most commands never do. */
  get signal(): AbortSignal {
    return this.stop.signal;
  }

  desktop() {
    return this.services.desktop();
  }

  accessibility() {
    return this.services.accessibility();
  }

  browser() {
    return this.services.browser();
  }

  get shells() {
    return this.services.shells;
  }

  get commandUser() {
    return this.services.commandUser;
  }

  get files() {
    return this.services.files;
  }

  get recordings() {
    return this.services.recordings;
  }

  get trajectories() {
    return this.services.trajectories;
  }

  get control() {
    return this.services.control;
  }

  get log() {
    return this.services.log;
  }

  get emit() {
    return this.options.emit;
  }

  get connection() {
    return this.options.connection;
  }

  run(name: string, params: unknown): Promise<Outcome>;
  run<S extends AnyParams, R>(command: CommandDefinition<S, R>, params: unknown): Promise<Outcome<R>>;
  run(command: string | AnyCommand, params: unknown): Promise<Outcome> {
    // A step of a batch: under this command's deadline, and its client's.
    this.stop.arm();
    return this.registry.run(typeof command === "string" ? command : command.name, params, {
      signal: this.stop,
      transport: "batch",
      connection: this.options.connection,
      holder: this.options.holder,
      whenPaused: this.options.whenPaused,
    });
  }
}

/** `undefined`, `null` or an object without a key of its own. */
function isEmpty(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (typeof value !== "object" || Array.isArray(value)) return false;
  for (const key in value) if (Object.hasOwn(value, key)) return false;
  return true;
}

/** How long a cancelled input command may go on holding the input queue. */
const INPUT_STOP_GRACE_MS = 5000;

/** Settles when `work` does, or `INPUT_STOP_GRACE_MS` after `stop` stops, whichever is first. */
function stoppedOrGivenUp(work: Promise<unknown>, stop: Stop): Promise<void> {
  return new Promise((resolve) => {
    let grace: NodeJS.Timeout | undefined;
    const onAbort = () => {
      grace = setTimeout(resolve, INPUT_STOP_GRACE_MS);
    };
    if (stop.aborted) onAbort();
    else stop.listen(onAbort);
    const stopped = () => {
      stop.unlisten(onAbort);
      clearTimeout(grace);
      resolve();
    };
    work.then(stopped, stopped);
  });
}

function parseParams(def: AnyCommand, raw: unknown) {
  const value = raw === undefined || raw === null ? {} : raw;
  if (typeof value !== "object" || Array.isArray(value)) {
    const kind = Array.isArray(value) ? "an array" : `a ${typeof value}`;
    return { success: false as const, error: `Invalid params: expected an object, got ${kind}` };
  }
  const result = def.params.safeParse(value);
  if (result.success) return { success: true as const, data: result.data };
  const unknown = result.error.issues.find(
    (issue) => issue.code === "unrecognized_keys" && issue.path.length === 0,
  );
  if (unknown && unknown.code === "unrecognized_keys") {
    return { success: false as const, error: unknownParamsMessage(def, unknown.keys) };
  }
  return { success: false as const, error: describeZodError(result.error) };
}

function toFailure(err: unknown, command: string, log: Logger): Outcome {
  if (err instanceof CommandError) return failure(err.code, err.message, err.fields);
  log.error({ command, err }, "command failed unexpectedly");
  const message = err instanceof Error ? err.message : String(err);
  return failure("internal", `${command} failed: ${message}`);
}
