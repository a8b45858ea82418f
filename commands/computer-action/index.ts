/**
 * `computer_action`: the calls of a model's computer tool, exactly as the model emitted them, run
 * through the existing commands and answered in the shape that vocabulary's tool result takes. One
 * module per vocabulary:
 *
 * - anthropic.ts: Anthropic's `computer_20241022` … `computer_20251124` (one `input`);
 * - toolset.ts: Claude's `computer_toolset_20260801` (member `tool_use` blocks, a turn of them);
 * - openai.ts: OpenAI's `computer_use_preview` and the GA `computer` tool (an action, or a batch);
 * - gemini.ts: Gemini's computer use (`functionCall`s on a 0–999 grid).
 *
 * The model's display size is in the request (stateless, display.ts): points are mapped from it to
 * the screen, screenshots are scaled to it, `cursor_position` is mapped back. Each action's effect
 * is checked (effect.ts; waited for with `verify`).
 *
 * The model's mistakes (an unknown action, a point off the display, a key that does not exist) are
 * replies with `is_error: true` and a short sentence for the model; the author's (a bad display size,
 * a call of no vocabulary, a Gemini function that does not exist) are `invalid_params`.
 */
import { z } from "zod";
import { CommandError } from "../../src/common/errors.js";
import { defineCommand } from "../../src/computer/core/command.js";
import type { EffectReport } from "../../src/desktop/effect.js";
import { effectLine, verifyParams } from "../effect.js";
import {
  anthropicAction,
  anthropicReply,
  anthropicStep,
  type ContentBlock,
  MAX_DURATION_S,
  pngBlock,
} from "./anthropic.js";
import { autoDisplay, DisplayMapping, sizeSchema, type Vocabulary } from "./display.js";
import { geminiCall, geminiReply, geminiReplyOf, runGemini } from "./gemini.js";
import { callOutput, OPENAI_WAIT_S, openaiAction, openaiReply, openaiStep } from "./openai.js";
import { describeForModel, ModelDesk, ModelError, runStep, type Step, type StepResult } from "./steps.js";
import {
  configsParam,
  isMemberCall,
  memberCall,
  runToolset,
  toolsetReply,
  toolsetReplyOf,
  toolsetTools,
} from "./toolset.js";

export const computerActionResult = z.discriminatedUnion("vocabulary", [
  anthropicReply,
  openaiReply,
  toolsetReply,
  geminiReply,
]);
export type ComputerActionResult = z.infer<typeof computerActionResult>;

/**
 * A call as the model emitted it: any JSON object (each vocabulary checks its own), typed `object` so
 * that an SDK's block (an interface, without an index signature) is taken as it is.
 */
const actionObject = z
  .custom<object>(
    (value) => typeof value === "object" && value !== null && !Array.isArray(value),
    "expected an object",
  )
  .meta({ type: "object" });
type Call = Record<string, unknown>;
/** The most calls one request may carry. */
const MAX_BATCH = 100;
const actionsParam = z.array(actionObject).min(1).max(MAX_BATCH);

/** OpenAI's `computer_call` output item, as the Responses API returns it (both generations). */
const computerCall = z
  .object({
    type: z.literal("computer_call").optional(),
    call_id: z.string().max(200).optional(),
    action: actionObject.nullish(),
    actions: actionsParam.nullish(),
  })
  .passthrough();

interface Request {
  vocabulary: Vocabulary;
  actions: Record<string, unknown>[];
  /** Given as a list (`actions`): the reply answers each, and errors name the call's index. */
  batch: boolean;
  callId?: string | null;
}

/** Which vocabulary an action is in: given, or told by its shape. */
function vocabularyOf(action: Record<string, unknown>, given?: Vocabulary | null): Vocabulary {
  if (given) return given;
  if (action.type === "tool_use") return "toolset";
  const anthropic = typeof action.action === "string";
  const openai = typeof action.type === "string";
  if (anthropic !== openai) return anthropic ? "anthropic" : "openai";
  if (!anthropic && typeof action.name === "string") return "gemini";
  throw new CommandError(
    "invalid_params",
    "Invalid params: cannot tell the action's vocabulary (Anthropic's has an 'action' field, a toolset member is a " +
      "tool_use block, OpenAI's has a 'type' field, Gemini's functionCall a 'name'); give vocabulary",
  );
}

/** What to run, from exactly one of `action`, `actions` and `computer_call`. */
function requestOf(params: {
  action?: object | null;
  actions?: object[] | null;
  computer_call?: z.infer<typeof computerCall> | null;
  vocabulary?: Vocabulary | null;
  call_id?: string | null;
}): Request {
  const given = (["action", "actions", "computer_call"] as const).filter((key) => params[key] != null);
  if (given.length !== 1) {
    throw new CommandError(
      "invalid_params",
      `Invalid params: give exactly one of action, actions and computer_call (got ${given.length === 0 ? "none" : given.join(" and ")})`,
    );
  }
  const call = params.computer_call;
  if (call && (call.action == null) === (call.actions == null)) {
    throw new CommandError(
      "invalid_params",
      "Invalid params: computer_call: expected exactly one of 'action' (computer_use_preview) and 'actions' (the GA computer tool)",
    );
  }
  const callId = params.call_id ?? call?.call_id;
  if (call) {
    return call.actions
      ? { vocabulary: "openai", actions: call.actions as Call[], batch: true, callId }
      : { vocabulary: "openai", actions: [call.action as Call], batch: false, callId };
  }
  if (params.actions) {
    const actions = params.actions as Call[];
    const vocabulary = params.vocabulary ?? batchVocabulary(actions);
    if (vocabulary === "anthropic") {
      throw new CommandError(
        "invalid_params",
        "Invalid params: a list of actions is OpenAI's batch, a turn of toolset calls or Gemini's calls; " +
          "Anthropic's computer tool takes one action",
      );
    }
    return { vocabulary, actions, batch: true, callId };
  }
  const action = params.action as Call;
  return { vocabulary: vocabularyOf(action, params.vocabulary), actions: [action], batch: false, callId };
}

/** A list's vocabulary: a turn with a toolset call, Gemini's calls (a `name`, no `type`), else OpenAI's batch. */
function batchVocabulary(actions: Record<string, unknown>[]): Vocabulary {
  if (actions.some((a) => a.type === "tool_use")) return "toolset";
  if (actions.every((a) => typeof a.name === "string" && a.type === undefined)) return "gemini";
  return "openai";
}

/** Seconds a call may wait (`wait`, `hold_key`, Gemini's wait) and characters it types, for the deadline. */
function actionCost(action: Record<string, unknown>): number {
  const body = (action.input ?? action.args ?? action) as Record<string, unknown>;
  const seconds = typeof body.duration === "number" ? Math.min(MAX_DURATION_S, body.duration) : 0;
  const wait = action.type === "wait" ? OPENAI_WAIT_S : action.name === "wait_5_seconds" ? 5 : 0;
  const typed = typeof body.text === "string" ? body.text.length * 10 : 0;
  return (seconds + wait) * 1000 + typed + 1000;
}

/** Whether any call asks a person to confirm it (Gemini's `safety_decision`), for the deadline. */
function asksConfirmation(actions: Record<string, unknown>[]): boolean {
  return actions.some((a) => {
    const args = a.args as Record<string, unknown> | undefined;
    return typeof args?.safety_decision === "object" && args.safety_decision !== null;
  });
}

/** Anthropic's and OpenAI's steps, every one checked (its shape, its points) before the first runs. */
function plannedSteps(desk: ModelDesk, request: Request): Step[] {
  const label = (i: number) => (request.batch ? `actions[${i}]: ` : "");
  return request.actions.map((action, i) => {
    try {
      if (request.vocabulary === "anthropic") {
        const checked = anthropicAction.safeParse(action);
        if (!checked.success) throw new ModelError(describeForModel(checked.error, "action"));
        return anthropicStep(desk, checked.data);
      }
      const checked = openaiAction.safeParse(action);
      if (!checked.success) throw new ModelError(describeForModel(checked.error, "type"));
      return openaiStep(desk, checked.data);
    } catch (err) {
      if (err instanceof ModelError) throw new ModelError(label(i) + err.message);
      throw err;
    }
  });
}

/** Runs the steps in order; the first that fails stops the rest (the error says how many ran). */
async function runSteps(
  desk: ModelDesk,
  request: Request,
  steps: Step[],
  verify: z.infer<z.ZodObject<typeof verifyParams>>,
): Promise<{ output: StepResult; effects: (EffectReport | null)[] }> {
  const effects: (EffectReport | null)[] = steps.map(() => null);
  let output: StepResult = {};
  for (const [i, step] of steps.entries()) {
    output = await runStep(desk, step, verify);
    effects[i] = output.effect ?? null;
    if (output.error === undefined) continue;
    if (request.batch) {
      const rest = steps.length - i - 1;
      output.error =
        `actions[${i}]: ${String(request.actions[i].type)} failed: ${output.error} ${i} action${i === 1 ? "" : "s"} before it ran` +
        `${rest > 0 ? `, the ${rest} after it did not` : ""}.`;
    }
    break;
  }
  return { output, effects };
}

export const computerAction = defineCommand({
  name: "computer_action",
  description:
    "Runs the calls of a model's computer tool as the model emitted them, in the model's display space, and returns " +
    "that vocabulary's tool result: Claude's computer toolset (member tool_use blocks, a turn of them), Anthropic's " +
    "computer tool (computer_2024…2025), OpenAI's computer-use tool (an action or a computer_call's batch), Gemini's " +
    "computer use (functionCalls on a 0–999 grid). Each action says whether it had an effect (verify: wait for it).",
  params: z.object({
    action: actionObject
      .nullish()
      .describe(
        "One call exactly as the model emitted it: a toolset member's tool_use block, Anthropic's tool_use.input, " +
          "OpenAI's action, Gemini's functionCall",
      ),
    actions: actionsParam
      .nullish()
      .describe(
        "A list, run in order and stopping at the first failure: a turn's content blocks (its computer toolset " +
          "tool_use blocks are answered), OpenAI's batch (computer_call.actions), Gemini's functionCalls",
      ),
    computer_call: computerCall
      .nullish()
      .describe("A whole OpenAI computer_call item: its action or actions run, its call_id is echoed"),
    vocabulary: z
      .enum(["anthropic", "openai", "toolset", "gemini"])
      .nullish()
      .describe("Inferred from the call when omitted (toolset: Claude's computer_toolset_20260801)"),
    display: z
      .union([z.literal("auto"), sizeSchema])
      .nullish()
      .describe(
        "The display size the model was given (its coordinates; Gemini's: the screenshot's size), 'auto' for one " +
          "Hangar chooses with the screen's aspect, or omitted for the screen's own size",
      ),
    configs: configsParam,
    screenshot: z
      .boolean()
      .nullish()
      .describe(
        "Reply with a screenshot after the action(s) (default true; for the toolset false: it has a member)",
      ),
    call_id: z
      .string()
      .max(200)
      .nullish()
      .describe("The tool call's id (Anthropic's tool_use id, OpenAI's call_id), echoed in tool_result"),
    confirm_timeout: z
      .number()
      .min(1)
      .max(86_400)
      .default(600)
      .describe(
        "Seconds a person has to confirm a Gemini call whose safety_decision asks for it (default 600)",
      ),
    ...verifyParams,
  }),
  result: computerActionResult,
  deadlineMs: ({ action, actions, computer_call, confirm_timeout, verify, verify_ms }) => {
    const list = (
      action ? [action] : (actions ?? computer_call?.actions ?? [computer_call?.action ?? {}])
    ) as Call[];
    const perAction = verify ? verify_ms + 2000 : 0;
    const confirming = asksConfirmation(list) ? confirm_timeout * 1000 : 0;
    return 30_000 + confirming + list.reduce((sum: number, one) => sum + actionCost(one) + perAction, 0);
  },
  tools: toolsetTools(),
  handler: async (params, ctx) => {
    const request = requestOf(params);
    const { vocabulary } = request;
    if (params.configs && vocabulary !== "toolset") {
      throw new CommandError(
        "invalid_params",
        "Invalid params: configs is the computer toolset's (vocabulary toolset)",
      );
    }
    // The calls are checked before the desktop is asked for: the author's mistakes need none.
    const calls =
      vocabulary === "toolset"
        ? toolsetCalls(request)
        : vocabulary === "gemini"
          ? request.actions.map((call, i) => geminiCall(call, request.batch ? `actions[${i}]` : "action"))
          : [];
    const desktop = await ctx.desktop();
    const screen = await desktop.screenSize();
    const display = params.display === "auto" ? autoDisplay(screen, vocabulary) : (params.display ?? screen);
    const desk = new ModelDesk(ctx, desktop, new DisplayMapping(display, screen));
    const verify = { verify: params.verify, verify_ms: params.verify_ms };

    if (vocabulary === "toolset") {
      const answers = await runToolset(desk, calls as ReturnType<typeof toolsetCalls>, {
        configs: params.configs,
        verify,
        screenshot: params.screenshot ?? false,
      });
      return toolsetReplyOf(display, answers, !request.batch);
    }
    if (vocabulary === "gemini") {
      const answers = await runGemini(desk, calls as ReturnType<typeof geminiCall>[], {
        verify,
        screenshot: params.screenshot ?? true,
        confirmTimeout: params.confirm_timeout,
      });
      return geminiReplyOf(display, answers, !request.batch);
    }

    let output: StepResult;
    let effects: (EffectReport | null)[] = [];
    try {
      ({ output, effects } = await runSteps(desk, request, plannedSteps(desk, request), verify));
    } catch (err) {
      if (!(err instanceof ModelError)) throw err;
      output = { error: err.message };
    }
    // OpenAI's call output is an image, also after an error; Anthropic's error is its sentence alone.
    const wantsShot = (params.screenshot ?? true) && output.image === undefined;
    if (wantsShot && (vocabulary === "openai" || output.error === undefined)) {
      output.image = await desk.screenshot();
    }
    const isError = output.error !== undefined;
    const text = output.error ?? output.text;
    const head = { display, is_error: isError, ...(text !== undefined ? { text } : {}) };
    const effect = request.batch ? { effects } : (output.effect ?? {});
    if (vocabulary === "anthropic") {
      const content: ContentBlock[] = [];
      if (text !== undefined) content.push({ type: "text", text });
      if (output.image !== undefined) content.push(pngBlock(output.image));
      const line = isError ? undefined : effectLine(output.effect, params.verify);
      if (line) content.push({ type: "text", text: line });
      const toolResult = {
        type: "tool_result" as const,
        tool_use_id: request.callId ?? undefined,
        content,
        ...(isError ? { is_error: true } : {}),
      };
      return { vocabulary: "anthropic" as const, ...head, tool_result: toolResult, ...effect };
    }
    return {
      vocabulary: "openai" as const,
      ...head,
      tool_result: callOutput(request.callId, output.image),
      ...effect,
    };
  },
});

/** The computer toolset's member calls of a request: every block of `actions` that is one, or `action`. */
function toolsetCalls(request: Request) {
  if (!request.batch) return [memberCall(request.actions[0], "action")];
  const calls = request.actions.flatMap((block, i) =>
    isMemberCall(block) ? [memberCall(block, `actions[${i}]`)] : [],
  );
  if (calls.length === 0) {
    throw new CommandError(
      "invalid_params",
      'Invalid params: actions holds no computer toolset call (a tool_use block with toolset_name "computer")',
    );
  }
  return calls;
}

export default [computerAction];
