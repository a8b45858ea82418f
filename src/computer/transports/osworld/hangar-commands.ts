/**
 * How OSWorld's routes run Hangar commands: by action, through a table that the composition root
 * hands in (commands/osworld.ts maps each action to a command), so that no route names a command.
 * Every call goes through `registry.run()` (validation, deadlines, the input queue, the activity
 * timeline), as any other transport's.
 */
import type { ErrorCode } from "../../../common/errors.js";
import type { CommandRegistry } from "../../core/registry.js";

/** The actions the routes need; the composition root maps each to a command (commands/osworld.ts). */
const ACTIONS = [
  "capture",
  "screenSize",
  "cursorPosition",
  "run",
  "startProgram",
  "openTarget",
  "accessibilityTree",
  "startRecording",
  "stopRecording",
  "recordingStatus",
  "setWallpaper",
  "moveTo",
  "leftClick",
  "doubleClick",
  "tripleClick",
  "rightClick",
  "middleClick",
  "buttonDown",
  "buttonUp",
  "dragTo",
  "wheel",
  "typeText",
  "pressKey",
  "keyDown",
  "keyUp",
  "keyCombo",
] as const;

export type OsworldAction = (typeof ACTIONS)[number];
export type OsworldCommandTable = Readonly<Record<OsworldAction, string>>;

/** The registry and the table: what the routes run commands with. */
export interface OsworldCommands {
  registry: CommandRegistry;
  table: OsworldCommandTable;
}

/** A command that failed: its code, message and the extra fields of the failure. */
export class HangarCommandFailed extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly fields: Readonly<Record<string, unknown>>,
  ) {
    super(message);
  }
}

/** Runs the command an OSWorld action stands for; its result, or `HangarCommandFailed`. */
export async function runAction<T = Record<string, unknown>>(
  commands: OsworldCommands,
  action: OsworldAction,
  params: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<T> {
  const outcome = await commands.registry.run(commands.table[action], params, {
    transport: "osworld",
    signal,
  });
  if (!outcome.success) throw new HangarCommandFailed(outcome.code, outcome.error, outcome.fields);
  return outcome.result as T;
}

/** A command's result, or its failure's message: for routes that answer failures their own way. */
export async function attempt<T>(
  work: () => Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; message: string }> {
  try {
    return { ok: true, value: await work() };
  } catch (err) {
    if (err instanceof HangarCommandFailed) return { ok: false, message: err.message };
    throw err;
  }
}

/** A short shell line (wmctrl, gsettings) with the desktop's variables; exit code -1 when it could not run. */
export async function shellLine(
  commands: OsworldCommands,
  env: () => Promise<Record<string, string>>,
  line: string,
): Promise<{ stdout: string; return_code: number }> {
  const ran = await attempt(async () =>
    runAction<{ stdout: string; return_code: number }>(commands, "run", {
      command: line,
      timeout: 10,
      env: await env(),
    }),
  );
  return ran.ok ? ran.value : { stdout: "", return_code: -1 };
}
