/**
 * Gemini's computer use: a `functionCall` (`{name, args}`, `@google/genai`'s `FunctionCall`) of
 * the predefined computer-use functions, its points on a 0–999 grid whatever the screen's size,
 * answered with the `FunctionResponse` the model expects: `{name, id?, response: {url?, …},
 * parts: [{inlineData: {mimeType: "image/png", data}}]}` (the screenshot after the action).
 *
 * The browser functions (`open_web_browser`, `navigate`, `search`, `go_back`, `go_forward`) drive
 * the desktop's own Chromium (the `browser_*` commands); the others the desktop. A `safety_decision`
 * that asks for confirmation is put to a person (`request_help`) before anything runs; their answer
 * decides, and the response says what it was; without one the action does not run.
 */
import { z } from "zod";
import { CommandError } from "../../src/common/errors.js";
import { Bytes, bytesField } from "../../src/computer/core/bytes.js";
import type { Point } from "../../src/desktop/backend.js";
import { browserGetCurrentUrl, browserGoBack, browserGoForward, browserVisitUrl } from "../browser.js";
import { requestHelp } from "../control.js";
import { effectLine, effectReport, optionalEffect, type VerifyParams } from "../effect.js";
import { drag, hotkey, leftClick, moveCursor, pressKey, scrollDirection, typeText } from "../input.js";
import { GRID, gridToScreen, sizeSchema } from "./display.js";
import {
  type Answer,
  answerFields,
  answerInTurn,
  describeForModel,
  type ModelDesk,
  ModelError,
  NOT_EXECUTED,
  notches,
  pathOf,
  pointerAim,
  runStep,
  type Step,
} from "./steps.js";

/** `wait_5_seconds`. */
const WAIT_S = 5;
/** `scroll_at`'s default magnitude, in grid units (the reference implementation's). */
const DEFAULT_MAGNITUDE = 800;
/** Wheel notches of `scroll_document` left or right (up and down are Page Up and Page Down). */
const DOCUMENT_NOTCHES = 10;

const gridValue = z.number().min(0).max(999.999);
const at = { x: gridValue, y: gridValue };
const direction = z.enum(["up", "down", "left", "right"]);
/** The confirmation Gemini's safety service may ask for, in any call's `args`. */
const safetyDecision = z
  .object({ decision: z.string().max(200), explanation: z.string().max(10_000).optional() })
  .nullish();
const none = z.object({});

/** The predefined functions of Gemini's computer use and their `args`. */
const FUNCTIONS = {
  open_web_browser: none,
  wait_5_seconds: none,
  go_back: none,
  go_forward: none,
  search: none,
  navigate: z.object({ url: z.string().min(1).max(100_000) }),
  click_at: z.object(at),
  hover_at: z.object(at),
  type_text_at: z.object({
    ...at,
    text: z.string().max(100_000),
    press_enter: z.boolean().default(false),
    clear_before_typing: z.boolean().default(true),
  }),
  key_combination: z.object({ keys: z.string().min(1).max(200) }),
  scroll_document: z.object({ direction }),
  scroll_at: z.object({ ...at, direction, magnitude: gridValue.default(DEFAULT_MAGNITUDE) }),
  drag_and_drop: z.object({ ...at, destination_x: gridValue, destination_y: gridValue }),
} as const;
export type GeminiFunction = keyof typeof FUNCTIONS;
export const GEMINI_FUNCTIONS = Object.keys(FUNCTIONS) as GeminiFunction[];

/** A `FunctionCall` as the model emits it. */
export const functionCall = z.object({
  name: z.string().min(1).max(200),
  args: z.record(z.string(), z.unknown()).nullish(),
  id: z.string().max(200).nullish(),
});
export type FunctionCall = z.infer<typeof functionCall>;

/** The call a block is, or `invalid_params` naming what is wrong (an unknown function, above all). */
export function geminiCall(
  block: Record<string, unknown>,
  where: string,
): FunctionCall & { name: GeminiFunction } {
  const checked = functionCall.safeParse(block);
  if (!checked.success) {
    throw new CommandError(
      "invalid_params",
      `Invalid params: ${where}: not a Gemini functionCall ({name, args}): ${describeForModel(checked.error, "name")}`,
    );
  }
  const { name } = checked.data;
  if (!Object.hasOwn(FUNCTIONS, name)) {
    throw new CommandError(
      "invalid_params",
      `Invalid params: ${where}: '${name.slice(0, 100)}' is not one of Gemini's computer-use functions ` +
        `(${GEMINI_FUNCTIONS.join(", ")})`,
    );
  }
  return checked.data as FunctionCall & { name: GeminiFunction };
}

const functionResponse = z.object({
  id: z.string().optional(),
  name: z.string(),
  response: z
    .record(z.string(), z.unknown())
    .describe("url (where there is a page), error, effect, safety_acknowledgement, confirmation"),
  parts: z
    .array(
      z.object({
        inlineData: z.object({
          mimeType: z.literal("image/png"),
          data: bytesField("the screenshot, base64", { mimeType: "image/png" }),
        }),
      }),
    )
    .optional(),
});
type FunctionResponse = z.infer<typeof functionResponse>;

export const geminiReply = z.object({
  vocabulary: z.literal("gemini"),
  display: sizeSchema,
  is_error: z.boolean(),
  tool_result: functionResponse
    .optional()
    .describe("The FunctionResponse answering `action`, to send back in a functionResponse part"),
  tool_results: z.array(functionResponse).optional().describe("Those answering `actions`, in order"),
  ...optionalEffect,
  effects: z.array(effectReport.nullable()).optional(),
});
type GeminiReply = z.infer<typeof geminiReply>;

/** What `open_web_browser`, the history and the navigations answer: the page's address. */
async function page(work: Promise<{ url: string }>) {
  return { url: (await work).url };
}

/** The step of a call whose args are valid; its points are mapped from the grid now. */
function geminiStep(desk: ModelDesk, name: GeminiFunction, args: Record<string, unknown>): Step {
  const screen = desk.mapping.screen;
  const point = (x: number, y: number): Point => gridToScreen({ x, y }, screen);
  switch (name) {
    case "open_web_browser":
      return { run: () => page(desk.run(browserGetCurrentUrl, {})) };
    case "wait_5_seconds":
      return { run: () => desk.pause(WAIT_S).then(() => ({})) };
    case "go_back":
      return { run: () => page(desk.run(browserGoBack, {})) };
    case "go_forward":
      return { run: () => page(desk.run(browserGoForward, {})) };
    case "search":
      return {
        run: async () => {
          const home = new URL((await desk.ctx.browser()).searchUrl("")).origin;
          return page(desk.run(browserVisitUrl, { url: `${home}/` }));
        },
      };
    case "navigate": {
      const { url } = FUNCTIONS.navigate.parse(args);
      return { run: () => page(desk.run(browserVisitUrl, { url })) };
    }
    case "click_at": {
      const a = FUNCTIONS.click_at.parse(args);
      const to = point(a.x, a.y);
      return { aim: pointerAim(to), run: () => desk.run(leftClick, to).then(() => ({})) };
    }
    case "hover_at": {
      const a = FUNCTIONS.hover_at.parse(args);
      const to = point(a.x, a.y);
      return { aim: pointerAim(to), run: () => desk.run(moveCursor, to).then(() => ({})) };
    }
    case "type_text_at": {
      const { x, y, text, press_enter, clear_before_typing } = FUNCTIONS.type_text_at.parse(args);
      const to = point(x, y);
      return {
        aim: { kind: "keyboard", typed: text },
        run: async () => {
          await desk.run(leftClick, to);
          if (clear_before_typing) {
            await desk.run(hotkey, { keys: ["ctrl", "a"] });
            await desk.run(pressKey, { key: "Delete" });
          }
          await desk.run(typeText, { text });
          if (press_enter) await desk.run(pressKey, { key: "Return" });
          return {};
        },
      };
    }
    case "key_combination": {
      const combination = FUNCTIONS.key_combination.parse(args).keys;
      const keys = combination.split("+").map((key) => key.trim());
      if (keys.some((key) => key === ""))
        throw new ModelError(`Invalid keys: "${combination}" has an empty key.`);
      return { aim: { kind: "keyboard" }, run: () => desk.run(hotkey, { keys }).then(() => ({})) };
    }
    case "scroll_document": {
      const where = FUNCTIONS.scroll_document.parse(args).direction;
      if (where === "up" || where === "down") {
        const key = where === "up" ? "Page_Up" : "Page_Down";
        return { aim: { kind: "keyboard" }, run: () => desk.run(pressKey, { key }).then(() => ({})) };
      }
      return {
        aim: pointerAim(),
        run: () => desk.run(scrollDirection, { direction: where, clicks: DOCUMENT_NOTCHES }).then(() => ({})),
      };
    }
    case "scroll_at": {
      const a = FUNCTIONS.scroll_at.parse(args);
      const to = point(a.x, a.y);
      const where = a.direction;
      const across = where === "left" || where === "right";
      // The magnitude is on the grid too: a share of the screen's height (or width), in wheel notches.
      const pixels = (a.magnitude * (across ? screen.width : screen.height)) / GRID;
      const clicks = Math.abs(notches(pixels));
      return {
        aim: pointerAim(to),
        run: async () => {
          await desk.run(moveCursor, to);
          if (clicks > 0) await desk.run(scrollDirection, { direction: where, clicks });
          return {};
        },
      };
    }
    case "drag_and_drop": {
      const a = FUNCTIONS.drag_and_drop.parse(args);
      const from = point(a.x, a.y);
      const to = point(a.destination_x, a.destination_y);
      return {
        aim: pointerAim(from, to),
        run: () => desk.run(drag, { path: pathOf([from, to]) }).then(() => ({})),
      };
    }
  }
}

/** What a person writes to allow an action Gemini's safety service asked about. */
const YES = /^\s*(y|yes|ok|okay|approve|approved|allow|allowed|confirm|confirmed|go ahead|proceed)\b/i;

export interface GeminiOptions {
  verify: VerifyParams;
  screenshot: boolean;
  /** Seconds a person has to answer a safety confirmation. */
  confirmTimeout: number;
}

/** Answers the calls in order; after the first that fails, the rest are answered without running. */
export function runGemini(
  desk: ModelDesk,
  calls: readonly (FunctionCall & { name: GeminiFunction })[],
  options: GeminiOptions,
): Promise<Answer<FunctionResponse>[]> {
  return answerInTurn(
    calls,
    (call) => runCall(desk, call, options),
    (call) => respond(desk, call, { error: NOT_EXECUTED }, options),
  );
}

async function runCall(
  desk: ModelDesk,
  call: FunctionCall & { name: GeminiFunction },
  options: GeminiOptions,
): Promise<Answer<FunctionResponse>> {
  const args = call.args ?? {};
  const failure = async (
    error: string,
    extra: Record<string, unknown> = {},
  ): Promise<Answer<FunctionResponse>> => ({
    result: await respond(desk, call, { error, ...extra }, options),
    error: true,
    effect: null,
  });
  const safety = safetyDecision.safeParse(args.safety_decision);
  const checked = FUNCTIONS[call.name].safeParse(args);
  if (!checked.success || !safety.success) {
    const error = checked.success ? (safety.error as z.ZodError) : checked.error;
    return failure(`Invalid args of ${call.name}: ${describeForModel(error, "args")}`);
  }
  let step: Step;
  try {
    step = geminiStep(desk, call.name, args);
  } catch (err) {
    if (err instanceof ModelError) return failure(err.message);
    throw err;
  }
  const acknowledged: Record<string, unknown> = {};
  if (safety.data?.decision === "require_confirmation") {
    const asked = await confirm(desk, call, safety.data.explanation, options.confirmTimeout);
    if (!asked.yes) return failure(asked.text);
    Object.assign(acknowledged, { safety_acknowledgement: "true", confirmation: asked.text });
  }
  const done = await runStep(desk, step, options.verify);
  if (done.error !== undefined) return failure(done.error, acknowledged);
  const line = effectLine(done.effect, options.verify.verify);
  const response = await respond(
    desk,
    call,
    {
      ...(done.url !== undefined ? { url: done.url } : {}),
      ...(line ? { effect: line } : {}),
      ...acknowledged,
    },
    options,
  );
  return { result: response, error: false, effect: done.effect ?? null };
}

/**
 * Asks a person, through `request_help` (the console shows it), whether the action may run. Only
 * an answer that says yes allows it; no answer, or no console to ask through, does not.
 */
async function confirm(
  desk: ModelDesk,
  call: FunctionCall,
  explanation: string | undefined,
  timeout: number,
): Promise<{ yes: boolean; text: string }> {
  const action = `${call.name}(${JSON.stringify(call.args ?? {}).slice(0, 500)})`;
  const reason =
    `Gemini asks a person to confirm an action before it runs: ${action}. ` +
    `${explanation ? `Why: ${explanation} ` : ""}Hand control back with "yes" to allow it, or anything else to refuse.`;
  const outcome = await desk.ctx.run(requestHelp, { reason: reason.slice(0, 2000), timeout });
  if (outcome.success) {
    const { note, by } = outcome.result;
    const said = note.trim() ? `"${note.trim().slice(0, 500)}"` : "nothing";
    if (YES.test(note)) return { yes: true, text: `Confirmed by ${by}, who wrote ${said}.` };
    return { yes: false, text: `Not executed: ${by} did not confirm it (wrote ${said}).` };
  }
  if (outcome.code === "timeout") {
    return {
      yes: false,
      text: `Not executed: it awaits a person's confirmation (asked in the console; no answer within ${timeout} s).`,
    };
  }
  if (outcome.code === "not_supported") {
    return {
      yes: false,
      text: "Not executed: it needs a person's confirmation, and this desktop has no console to ask one through.",
    };
  }
  throw new CommandError(outcome.code, outcome.error);
}

/** The FunctionResponse: the page's address where there is a page, and the screenshot. */
async function respond(
  desk: ModelDesk,
  call: FunctionCall,
  response: Record<string, unknown>,
  options: GeminiOptions,
): Promise<FunctionResponse> {
  const url = response.url ?? (await currentUrl(desk));
  return {
    ...(call.id ? { id: call.id } : {}),
    name: call.name,
    response: { ...(url !== undefined ? { url } : {}), ...response },
    ...(options.screenshot
      ? {
          parts: [
            {
              inlineData: {
                mimeType: "image/png" as const,
                data: new Bytes(await desk.screenshot(), "image/png"),
              },
            },
          ],
        }
      : {}),
  };
}

/** The browser's address when the browser is running (it is not started for it). */
async function currentUrl(desk: ModelDesk): Promise<string | undefined> {
  const session = await desk.ctx.browser().catch(() => undefined);
  if (!session?.running) return undefined;
  const outcome = await desk.ctx.run(browserGetCurrentUrl, {});
  return outcome.success ? outcome.result.url : undefined;
}

/** The reply of `computer_action` for one call (`single`) or several. */
export function geminiReplyOf(
  display: GeminiReply["display"],
  answers: Answer<FunctionResponse>[],
  single: boolean,
): GeminiReply {
  return { vocabulary: "gemini", display, ...answerFields(answers, single) };
}
