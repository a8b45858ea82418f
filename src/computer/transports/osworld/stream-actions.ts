/**
 * The actions of OSWorld's streaming control channel (`/ws/control`): upstream's computer_13 action
 * space (`{"action_type": "CLICK", "parameters": {"x": 100, "y": 200}}`, or the parameters beside
 * `action_type`), each run as the Hangar command the table of commands/osworld.ts names for it,
 * through the registry, with pyautogui's defaults where upstream leans on them (a drag lasts 1 s,
 * `EXECUTE` runs a string through the shell and times out after 30 s).
 *
 * A failure is thrown as an `Error` whose message the channel sends back (upstream sends
 * `str(exc)`); `EXECUTE` of a program that fails is a result with `status: "error"`, as upstream's.
 */
import { CommandError } from "../../../common/errors.js";
import { commandLine, type ExecuteDeps, run } from "./execute.js";
import { HangarCommandFailed, type OsworldAction, runAction } from "./hangar-commands.js";

export interface ActionOutcome {
  status: "success" | "error";
  result: Record<string, unknown>;
}

/** `EXECUTE`'s deadline when the action gives none (upstream's). */
const EXECUTE_TIMEOUT = 30;
const LONGEST = 3600;

/** Upstream's reading of an action: its type, and its parameters (nested, or beside the type). */
function parse(action: unknown): { type: string; params: Record<string, unknown> } {
  if (typeof action !== "object" || action === null || Array.isArray(action)) {
    throw new Error("Action payload must be a dictionary.");
  }
  const { action_type: type, parameters, ...rest } = action as Record<string, unknown>;
  if (!type) throw new Error("Action payload must include 'action_type'.");
  const params =
    typeof parameters === "object" && parameters !== null && !Array.isArray(parameters)
      ? { ...(parameters as Record<string, unknown>) }
      : { ...(parameters === undefined ? {} : { parameters }), ...rest };
  return { type: String(type), params };
}

/** A point when both coordinates are given, none when neither is; one alone is upstream's error. */
function point(params: Record<string, unknown>): { x: unknown; y: unknown } | Record<string, never> {
  const hasX = "x" in params;
  const hasY = "y" in params;
  if (hasX !== hasY) throw new Error(`Unknown parameters: ${JSON.stringify(params)}`);
  return hasX ? { x: params.x, y: params.y } : {};
}

function button(params: Record<string, unknown>) {
  return "button" in params ? { button: params.button } : {};
}

const CLICKS: Record<number, OsworldAction> = { 1: "leftClick", 2: "doubleClick", 3: "tripleClick" };

/** Runs one action; resolves with its status and result, or rejects with upstream's message. */
export async function runStreamAction(deps: ExecuteDeps, action: unknown): Promise<ActionOutcome> {
  const { type, params } = parse(action);
  const done = (result: Record<string, unknown> = {}): ActionOutcome => ({ status: "success", result });
  const act = async (name: OsworldAction, args: Record<string, unknown>) => {
    try {
      await runAction(deps.commands, name, args);
    } catch (err) {
      if (err instanceof HangarCommandFailed) throw new Error(err.message);
      throw err;
    }
    return done();
  };
  switch (type) {
    case "WAIT":
    case "FAIL":
    case "DONE":
      return done({ noop: true });
    case "MOVE_TO": {
      const at = point(params);
      // pyautogui.moveTo() with no point moves nowhere.
      return "x" in at ? act("moveTo", at) : done();
    }
    case "CLICK": {
      const clicks = params.num_clicks ?? 1;
      const which = params.button ?? "left";
      if (which === "right" && clicks === 1) return act("rightClick", point(params));
      if (which === "middle" && clicks === 1) return act("middleClick", point(params));
      if (which !== "left") throw new Error(`button: ${String(which)} is clicked once at a time here`);
      const name = typeof clicks === "number" ? CLICKS[clicks] : undefined;
      if (!name) throw new Error(`num_clicks: expected 1, 2 or 3, got ${JSON.stringify(clicks)}`);
      return act(name, point(params));
    }
    case "RIGHT_CLICK":
      return act("rightClick", point(params));
    case "DOUBLE_CLICK":
      return act("doubleClick", point(params));
    case "MOUSE_DOWN":
      return act("buttonDown", button(params));
    case "MOUSE_UP":
      return act("buttonUp", button(params));
    case "DRAG_TO":
      if (!("x" in params && "y" in params)) throw new Error(`Unknown parameters: ${JSON.stringify(params)}`);
      return act("dragTo", {
        x: params.x,
        y: params.y,
        duration: params.duration ?? 1.0,
        ...button(params),
      });
    case "SCROLL":
      if (!("dx" in params || "dy" in params))
        throw new Error(`Unknown parameters: ${JSON.stringify(params)}`);
      // pyautogui: positive dy scrolls up, positive dx right; Hangar's scroll says the same.
      return act("wheel", { x: params.dx ?? 0, y: params.dy ?? 0 });
    case "TYPING":
      if (!("text" in params)) throw new Error(`Unknown parameters: ${JSON.stringify(params)}`);
      return act("typeText", { text: String(params.text) });
    case "PRESS":
      return act("pressKey", { key: String(params.key ?? "") });
    case "KEY_DOWN":
      return act("keyDown", { key: String(params.key ?? "") });
    case "KEY_UP":
      return act("keyUp", { key: String(params.key ?? "") });
    case "HOTKEY": {
      const { keys } = params;
      if (!Array.isArray(keys) || keys.length === 0) throw new Error("Keys must be a non-empty list of keys");
      return act("keyCombo", { keys: keys.map(String) });
    }
    case "EXECUTE":
      return execute(deps, params);
    default:
      throw new Error(`Unknown action type: ${type}`);
  }
}

/** `EXECUTE`: upstream's subprocess.run; a program that fails is an `error` status with its output. */
async function execute(deps: ExecuteDeps, params: Record<string, unknown>): Promise<ActionOutcome> {
  if (params.command === undefined || params.command === null) {
    throw new Error(`Unknown parameters: ${JSON.stringify(params)}`);
  }
  const timeout = params.timeout ?? EXECUTE_TIMEOUT;
  if (typeof timeout !== "number" || !(timeout > 0) || timeout > LONGEST) {
    throw new Error(`timeout: expected seconds from 0 to ${LONGEST}`);
  }
  const workingDir = params.working_dir;
  if (workingDir !== undefined && workingDir !== null && typeof workingDir !== "string") {
    throw new Error("working_dir: expected a path");
  }
  let line: string;
  try {
    ({ line } = commandLine({ ...params, shell: params.shell ?? typeof params.command === "string" }));
  } catch (err) {
    if (err instanceof CommandError) throw new Error(err.message);
    throw err;
  }
  const ran = await run(deps, line, timeout, workingDir ?? undefined);
  if (!ran.ok) throw new Error(ran.timedOut ? `Command timed out after ${timeout} seconds` : ran.message);
  const { stdout, stderr, return_code } = ran.result;
  return {
    status: return_code === 0 ? "success" : "error",
    result: { output: stdout, error: stderr, returncode: return_code },
  };
}
