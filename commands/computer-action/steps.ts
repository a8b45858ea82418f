/**
 * What every vocabulary's actions are made of: the existing commands run through the registry
 * (typed `ctx.run`), in the model's display space, with held keys released whatever happens, and
 * each action checked for its effect.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { z } from "zod";
import { CommandError } from "../../src/common/errors.js";
import type { AnyParams, CommandContext, CommandDefinition } from "../../src/computer/core/command.js";
import type { DesktopBackend, Point } from "../../src/desktop/backend.js";
import type { Aim, EffectReport } from "../../src/desktop/effect.js";
import { normalizeKey } from "../../src/desktop/keys.js";
import { takeScreenshot } from "../../src/desktop/screenshot.js";
import { checkEffect, type VerifyParams } from "../effect.js";
import { keyDown } from "../input.js";
import type { DisplayMapping } from "./display.js";

/** A mistake of the model: answered as a tool result it can read, not as a failed command. */
export class ModelError extends Error {}

/** What an action gives besides the screenshot after it. */
export interface ActionOutput {
  /** Its own output (`cursor_position`'s point), for the model. */
  text?: string;
  /** A PNG that replaces the screenshot after the action (`screenshot`, `zoom`). */
  image?: Buffer;
  /** The page's address after a browser action. */
  url?: string;
}

/** One action, checked and ready to run. */
export interface Step {
  /** Where it aims, for the check of its effect; none for actions without one (a screenshot, a wait). */
  readonly aim?: Aim;
  run(): Promise<ActionOutput>;
}

/** The desktop as the model sees it: its display, and the commands that act on it. */
export class ModelDesk {
  constructor(
    readonly ctx: CommandContext,
    readonly desktop: DesktopBackend,
    readonly mapping: DisplayMapping,
  ) {}

  /** Runs a command and returns its result; its failure becomes the model's error. */
  async run<S extends AnyParams, R>(command: CommandDefinition<S, R>, params: z.input<S>): Promise<R> {
    const outcome = await this.ctx.run(command, params);
    if (outcome.success) return outcome.result;
    if (outcome.code === "invalid_params" || outcome.code === "not_found" || outcome.code === "failed") {
      throw new ModelError(outcome.error.replace(/^Invalid params: /, ""));
    }
    throw new CommandError(outcome.code, outcome.error);
  }

  /**
   * Holds `keys` while `work` runs. They are released on the desktop directly, so that a cancelled
   * or timed-out action (whose signal refuses further commands) still lets them go.
   */
  async holding(keys: readonly string[], work: () => Promise<unknown>): Promise<void> {
    const held: string[] = [];
    try {
      for (const key of keys) {
        await this.run(keyDown, { key });
        held.push(normalizeKey(key));
      }
      await work();
    } finally {
      for (const key of held.reverse()) await this.desktop.key(key, "up");
    }
  }

  /** A point of the model's display on the screen; off the display is the model's error. */
  toScreen([x, y]: readonly [number, number]): Point {
    const { width, height } = this.mapping.display;
    if (x < 0 || y < 0 || x >= width || y >= height) {
      throw new ModelError(`Coordinate (${x}, ${y}) is outside the ${width}x${height} display.`);
    }
    return this.mapping.toScreen({ x, y });
  }

  /** `{x, y}` on the screen for a command's point parameters, or nothing when the model gave none. */
  point(pair?: readonly [number, number] | null): Partial<Point> {
    return pair ? this.toScreen(pair) : {};
  }

  /** The screen as the model sees it: PNG at exactly the display size. */
  async screenshot(): Promise<Buffer> {
    const shot = await takeScreenshot(this.desktop, {
      format: "png",
      quality: 95,
      size: this.mapping.display,
    });
    return shot.data;
  }

  /**
   * A region of the model's display at the screen's resolution: fitted within the display size
   * (`fit`), or scaled to fill it, keeping its aspect (`fill`: up when the region is small).
   */
  async zoom(region: readonly number[], fit: "fit" | "fill"): Promise<Buffer> {
    const [x0, y0, x1, y1] = region;
    const { width, height } = this.mapping.display;
    if (x1 <= x0 || y1 <= y0 || x0 < 0 || y0 < 0 || x1 > width || y1 > height) {
      throw new ModelError(
        `The zoom region must satisfy 0 <= x0 < x1 <= ${width} and 0 <= y0 < y1 <= ${height}.`,
      );
    }
    const area = this.mapping.regionToScreen(region);
    const scale = Math.min(width / area.width, height / area.height);
    const size =
      fit === "fill"
        ? {
            width: Math.max(1, Math.round(area.width * scale)),
            height: Math.max(1, Math.round(area.height * scale)),
          }
        : undefined;
    const shot = await takeScreenshot(this.desktop, {
      format: "png",
      quality: 95,
      region: area,
      ...(size ? { size } : { maxWidth: width, maxHeight: height }),
    });
    return shot.data;
  }

  pause(seconds: number): Promise<void> {
    return sleep(seconds * 1000, undefined, { signal: this.ctx.signal });
  }
}

/** The result of a step: its output, or the model's error, and its effect when it has one. */
export interface StepResult extends ActionOutput {
  error?: string;
  effect?: EffectReport;
}

/** Runs one step inside a check of its effect; the model's error is its answer, other errors throw. */
export async function runStep(desk: ModelDesk, step: Step, verify: VerifyParams): Promise<StepResult> {
  const check = step.aim ? await checkEffect(desk.ctx, desk.desktop, verify) : undefined;
  let output: ActionOutput;
  try {
    output = await step.run();
  } catch (err) {
    check?.cancel();
    if (err instanceof ModelError) return { error: err.message };
    throw err;
  }
  if (!check || !step.aim) return output;
  return { ...output, effect: await check.finish(step.aim) };
}

/** What a call that was not run answers, after one that failed in the same turn (the SDK's words). */
export const NOT_EXECUTED = "Not executed: an earlier computer action in this turn failed.";

/** One call's answer: the tool result to send back, whether it reports a failure, and its effect. */
export interface Answer<R> {
  result: R;
  error: boolean;
  effect: EffectReport | null;
}

/**
 * Answers the calls of a turn in order; after the first that fails, each later one is answered by
 * `skipped` and not run.
 */
export async function answerInTurn<C, R>(
  calls: readonly C[],
  run: (call: C) => Promise<Answer<R>>,
  skipped: (call: C) => R | Promise<R>,
): Promise<Answer<R>[]> {
  const answers: Answer<R>[] = [];
  for (const call of calls) {
    const failed = answers.some((a) => a.error);
    answers.push(failed ? { result: await skipped(call), error: true, effect: null } : await run(call));
  }
  return answers;
}

/** The fields of a reply answering one call (`single`: `tool_result`) or a list (`tool_results`). */
export function answerFields<R>(answers: Answer<R>[], single: boolean) {
  const is_error = answers.some((a) => a.error);
  if (single) {
    const [{ result, effect }] = answers;
    return { is_error, tool_result: result, ...(effect ?? {}) };
  }
  return { is_error, tool_results: answers.map((a) => a.result), effects: answers.map((a) => a.effect) };
}

/** `ctrl+shift` or `ctrl shift` (Anthropic's modifier `text`) as key names. */
export function splitKeys(text: string | null | undefined): string[] {
  return text ? text.split(/[+\s]+/).filter(Boolean) : [];
}

/** Wheel notches for pixels of scrolling: one per 100 px, at least one. */
export const PIXELS_PER_NOTCH = 100;
export function notches(pixels: number): number {
  if (pixels === 0) return 0;
  return Math.sign(pixels) * Math.max(1, Math.round(Math.abs(pixels) / PIXELS_PER_NOTCH));
}

/** The first problem zod found, as one sentence for the model. */
export function describeForModel(error: z.ZodError, field: string): string {
  const issue = error.issues[0];
  const where = issue.path.length > 0 ? issue.path.join(".") : field;
  if (issue.code === "invalid_union" && issue.path.length === 1 && issue.path[0] === field) {
    return `Unknown ${field}. ${issue.message}.`;
  }
  return `Invalid ${where}: ${issue.message}.`;
}

/** Points as a `drag` command's path. */
export function pathOf(points: readonly Point[]): [number, number][] {
  return points.map(({ x, y }) => [x, y]);
}

/** A pointer aim at screen points (none: where the pointer is when the action ends). */
export function pointerAim(...points: Partial<Point>[]): Aim {
  const known = points.filter((p): p is Point => p.x !== undefined && p.y !== undefined);
  return { kind: "pointer", ...(known.length > 0 ? { points: known } : {}) };
}
