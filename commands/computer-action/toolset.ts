/**
 * Claude's computer toolset (`computer_toolset_20260801`), the server side: a member `tool_use`
 * block exactly as the model emitted it (`{type: "tool_use", id, name, input, toolset_name:
 * "computer"}`), or a turn's blocks, answered with the `tool_result` blocks the API expects, as
 * `@anthropic-ai/sdk`'s `BetaAbstractComputerToolset20260801` renders them: a pure action's fixed
 * acknowledgment (`Clicked.`), then one line of its own (here: its effect); `cursor_position` as
 * `X=…,Y=…`; `screenshot` and `zoom` as an image. A turn runs in order and stops at the first
 * failure; the rest are answered with the SDK's text and not run.
 *
 * The members take the inputs of Anthropic's computer tool (anthropic.ts), so they run through the
 * same steps; `zoom` scales its region up to fill the display, as the toolset's `zoom` documents.
 */
import { z } from "zod";
import { CommandError } from "../../src/common/errors.js";
import type { Bytes } from "../../src/computer/core/bytes.js";
import type { CommandTool } from "../../src/computer/core/command.js";
import { effectLine, effectReport, optionalEffect, type VerifyParams, verifyParams } from "../effect.js";
import {
  type AnthropicAction,
  anthropicAction,
  anthropicStep,
  type ContentBlock,
  imageBlock,
  pngBlock,
  textBlock,
} from "./anthropic.js";
import { sizeSchema } from "./display.js";
import {
  type Answer,
  answerFields,
  answerInTurn,
  describeForModel,
  type ModelDesk,
  ModelError,
  NOT_EXECUTED,
  runStep,
} from "./steps.js";

export const TOOLSET_NAME = "computer";

/**
 * The members, each with the acknowledgment a pure action answers (`{field}`: that field of the
 * input as the model sent it), as the SDK's `computer-members` table has them; null: the member
 * answers its output instead.
 */
const MEMBERS = {
  key: "Pressed {text}.",
  hold_key: "Held {text} for {duration}s.",
  type: "Typed.",
  cursor_position: null,
  mouse_move: "Moved the mouse.",
  left_mouse_down: "Left mouse button pressed.",
  left_mouse_up: "Left mouse button released.",
  left_click: "Clicked.",
  left_click_drag: "Dragged.",
  right_click: "Right-clicked.",
  middle_click: "Middle-clicked.",
  double_click: "Double-clicked.",
  triple_click: "Triple-clicked.",
  scroll: "Scrolled {scroll_direction}.",
  wait: "Waited {duration}s.",
  screenshot: null,
  zoom: null,
} as const;
export type MemberName = keyof typeof MEMBERS;
export const MEMBER_NAMES = Object.keys(MEMBERS) as MemberName[];
const isMember = (name: string): name is MemberName => Object.hasOwn(MEMBERS, name);

/** A member `tool_use` block as the API returns it (`BetaToolUseBlock`); other fields are kept out. */
export const toolUseBlock = z.object({
  type: z.literal("tool_use"),
  id: z.string().min(1).max(200),
  name: z.string().min(1).max(200),
  input: z.record(z.string(), z.unknown()).nullish(),
  toolset_name: z.string().max(200).nullish(),
});
type ToolUse = z.infer<typeof toolUseBlock>;

const memberConfig = z
  .object({ enabled: z.boolean().nullish(), defer_loading: z.boolean().nullish() })
  .nullish();
/** The toolset entry's `configs` (`BetaComputerToolsetConfigs`): a member's key or nothing, nothing else. */
export const configsParam = z
  .object(
    Object.fromEntries(MEMBER_NAMES.map((name) => [name, memberConfig])) as Record<
      MemberName,
      typeof memberConfig
    >,
  )
  .strict()
  .nullish()
  .describe(
    "The toolset entry's configs, as sent to the API ({member: {enabled: false}}): a disabled member is refused",
  );
export type Configs = z.infer<typeof configsParam>;

export const toolResultBlock = z.object({
  type: z.literal("tool_result"),
  tool_use_id: z.string(),
  toolset_name: z.literal(TOOLSET_NAME),
  content: z.array(z.union([textBlock, imageBlock])),
  is_error: z.literal(true).optional(),
});
type ToolResult = z.infer<typeof toolResultBlock>;

export const toolsetReply = z.object({
  vocabulary: z.literal("toolset"),
  display: sizeSchema,
  is_error: z.boolean().describe("Whether a result is an error"),
  tool_result: toolResultBlock
    .optional()
    .describe("The tool_result block answering `action` (BetaToolResultBlockParam), to send back as it is"),
  tool_results: z
    .array(toolResultBlock)
    .optional()
    .describe("The tool_result blocks answering `actions`, in order"),
  ...optionalEffect,
  effects: z
    .array(effectReport.nullable())
    .optional()
    .describe("Each result's effect, in order (null: the member has none, or did not run)"),
});
type ToolsetReply = z.infer<typeof toolsetReply>;

/** Whether a block is one of this toolset's member calls (a turn holds other blocks too). */
export function isMemberCall(block: Record<string, unknown>): boolean {
  return block.type === "tool_use" && block.toolset_name === TOOLSET_NAME;
}

/** The member call a block is, or `invalid_params` saying why it is not one (`where`: its place). */
export function memberCall(block: Record<string, unknown>, where: string): ToolUse {
  const checked = toolUseBlock.safeParse(block);
  if (!checked.success) {
    throw new CommandError(
      "invalid_params",
      `Invalid params: ${where}: not a tool_use block (${describeForModel(checked.error, "type")})`,
    );
  }
  if (checked.data.toolset_name !== TOOLSET_NAME) {
    throw new CommandError(
      "invalid_params",
      `Invalid params: ${where}: tool_use ${JSON.stringify(checked.data.id)} is not a member call of the computer ` +
        `toolset (toolset_name is ${JSON.stringify(checked.data.toolset_name ?? null)}, not "computer")`,
    );
  }
  return checked.data;
}

/**
 * Answers a turn's member calls in order; after the first that fails, the rest are answered with
 * NOT_EXECUTED and not run. `screenshot`: the last result that ran gets a screenshot too.
 */
export async function runToolset(
  desk: ModelDesk,
  calls: readonly ToolUse[],
  options: { configs?: Configs; verify: VerifyParams; screenshot: boolean },
): Promise<Answer<ToolResult>[]> {
  const answers = await answerInTurn(
    calls,
    (call) => runMember(desk, call, options),
    (call) => result(call, [{ type: "text", text: NOT_EXECUTED }], true),
  );
  const last = answers.filter((a) => !a.error).at(-1);
  if (options.screenshot && last && !last.result.content.some((block) => block.type === "image")) {
    last.result.content.push(pngBlock(await desk.screenshot()));
  }
  return answers;
}

async function runMember(
  desk: ModelDesk,
  call: ToolUse,
  options: { configs?: Configs; verify: VerifyParams },
): Promise<Answer<ToolResult>> {
  const refuse = (text: string): Answer<ToolResult> => ({
    result: result(call, [{ type: "text", text }], true),
    error: true,
    effect: null,
  });
  if (!isMember(call.name)) {
    return refuse(`Error: unknown computer toolset member '${oneLine(call.name).slice(0, 100)}'`);
  }
  const name = call.name;
  if (options.configs?.[name]?.enabled === false) {
    return refuse(
      `The '${name}' action is not permitted by this application's permissions and cannot be used in this session.`,
    );
  }
  const input = call.input ?? {};
  const parsed = anthropicAction.safeParse({ ...input, action: name });
  if (!parsed.success) {
    return refuse(`invalid input for computer member '${name}': ${describeForModel(parsed.error, "input")}`);
  }
  let step: ReturnType<typeof anthropicStep>;
  try {
    step = anthropicStep(desk, parsed.data, "fill");
  } catch (err) {
    if (err instanceof ModelError) return refuse(err.message);
    throw err;
  }
  const done = await runStep(desk, step, options.verify);
  if (done.error !== undefined) return refuse(done.error);
  const content: ContentBlock[] = [];
  const acknowledgment = MEMBERS[name];
  if (acknowledgment !== null) content.push({ type: "text", text: fill(acknowledgment, input) });
  if (done.text !== undefined) content.push({ type: "text", text: done.text });
  if (done.image !== undefined) content.push(pngBlock(done.image));
  const line = effectLine(done.effect, options.verify.verify);
  if (line) content.push({ type: "text", text: line });
  return { result: result(call, content), error: false, effect: done.effect ?? null };
}

function result(call: ToolUse, content: ContentBlock[], isError = false): ToolResult {
  return {
    type: "tool_result",
    tool_use_id: call.id,
    toolset_name: TOOLSET_NAME,
    content,
    ...(isError ? { is_error: true as const } : {}),
  };
}

/** An acknowledgment with its `{field}`s filled from the input, each value on one line. */
function fill(template: string, input: Record<string, unknown>): string {
  return template.replace(/\{(\w+)\}/g, (_, field: string) => oneLine(String(input[field] ?? "")));
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

/** The reply of `computer_action` for one call (`single`) or a turn's calls. */
export function toolsetReplyOf(
  display: ToolsetReply["display"],
  answers: Answer<ToolResult>[],
  single: boolean,
): ToolsetReply {
  return { vocabulary: "toolset", display, ...answerFields(answers, single) };
}

/** What each member does, for the MCP tools (the SDK's input types say the same). */
const DESCRIPTIONS: Record<MemberName, string> = {
  key: 'Press a key or key combination ("ctrl+s", "alt+Tab", "Return"); repeat times.',
  hold_key: "Hold a key or key combination down for duration seconds.",
  type: "Type a string of text.",
  cursor_position: "The pointer's position, in screenshot pixels: X=…,Y=….",
  mouse_move: "Move the pointer to coordinate [x, y] (only to hover; click directly otherwise).",
  left_mouse_down: "Press and hold the left mouse button where the pointer is.",
  left_mouse_up: "Release the left mouse button.",
  left_click: "Left click at coordinate [x, y] (or where the pointer is), text: modifier keys held.",
  left_click_drag: "Drag from start_coordinate to coordinate with the left button.",
  right_click: "Right click at coordinate [x, y] (or where the pointer is).",
  middle_click: "Middle click at coordinate [x, y] (or where the pointer is).",
  double_click: "Double click at coordinate [x, y] (or where the pointer is).",
  triple_click: "Triple click at coordinate [x, y] (or where the pointer is).",
  scroll:
    "Scroll scroll_amount wheel notches in scroll_direction at coordinate [x, y] (or where the pointer is).",
  wait: "Wait duration seconds.",
  screenshot: "A screenshot of the screen.",
  zoom: "A region [x0, y0, x1, y1] of the screenshot at the screen's resolution, scaled to fill the image.",
};

/** The MCP tool name of a member: its own name would clash with Hangar's commands (`left_click`, `screenshot`). */
export const mcpToolName = (member: MemberName) => `computer_${member}`;

/**
 * The members as MCP tools (`computer_left_click`, …) for clients that speak only MCP: the
 * member's input as parameters, run as that member on the display `auto` chooses (the same for
 * every call, so that screenshots and points agree).
 */
export function toolsetTools(): CommandTool[] {
  return anthropicAction.options.map((option) => {
    const member = option.shape.action.value as MemberName;
    const { action: _action, key: _key, ...shape } = option.shape as Record<string, z.ZodType>;
    return {
      name: mcpToolName(member),
      description: `${DESCRIPTIONS[member]} (Claude's computer toolset member ${member}, on this desktop.)`,
      params: z.object({ ...shape, ...verifyParams }),
      toParams: ({ verify, verify_ms, ...input }: Record<string, unknown>) => ({
        action: { type: "tool_use", id: `mcp_${member}`, name: member, input, toolset_name: TOOLSET_NAME },
        display: "auto",
        verify,
        verify_ms,
      }),
      answer: (reply: ToolsetReply) => mcpAnswer(reply),
    };
  });
}

/** A member's result for MCP: its image, or its text lines; an error is the tool's error. */
function mcpAnswer(reply: ToolsetReply): { content: unknown; isError?: boolean } {
  const content = reply.tool_result?.content ?? [];
  const image = content.find((block) => block.type === "image");
  if (image) return { content: { image: image.source.data as Bytes } };
  const text = content.map((block) => (block.type === "text" ? block.text : "")).join("\n");
  return { content: text, ...(reply.is_error ? { isError: true } : {}) };
}

export type { AnthropicAction };
