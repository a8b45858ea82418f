/**
 * The one module where OSWorld's routes name Hangar commands. An adapter of a foreign protocol has
 * to say which command each of its routes stands for; the table keeps that in one place, and every
 * call still goes through `registry.run()` (validation, deadlines, the input queue, the activity
 * timeline), as any other transport's.
 */
import type { ErrorCode } from "../../../common/errors.js";
import type { CommandRegistry } from "../../core/registry.js";

export const OSWORLD_COMMANDS = {
  screenshot: "screenshot",
  screenSize: "get_screen_size",
  cursorPosition: "get_cursor_position",
  /** `/execute`, `/run_python`, `/run_bash_script`, and wmctrl for the window routes. */
  run: "run_command",
  launch: "launch",
  open: "open",
  accessibilityTree: "get_accessibility_tree",
  startRecording: "start_recording",
  stopRecording: "stop_recording",
  recordingStatus: "recording_status",
  setWallpaper: "set_wallpaper",
} as const;

export type OsworldAction = keyof typeof OSWORLD_COMMANDS;

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
  registry: CommandRegistry,
  action: OsworldAction,
  params: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<T> {
  const outcome = await registry.run(OSWORLD_COMMANDS[action], params, { transport: "osworld", signal });
  if (!outcome.success) throw new HangarCommandFailed(outcome.code, outcome.error, outcome.fields);
  return outcome.result as T;
}
