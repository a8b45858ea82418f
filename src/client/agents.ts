/**
 * Adapters for agent loops, built on `computer_action`: each takes the model's tool call as its SDK
 * hands it over and returns what goes back to the model.
 *
 * @example Anthropic Messages API
 * for (const block of message.content)
 *   if (block.type === "tool_use") results.push(await anthropicToolResult(hangar, block, { display }));
 * @example OpenAI Responses API
 * for (const item of response.output)
 *   if (item.type === "computer_call") input.push(await openaiComputerCallOutput(hangar, item, { display }));
 */
import type { CommandParams, CommandResult } from "./types.js";

type Reply = CommandResult<"computer_action">;
/** The `tool_result` block of Anthropic's Messages API. */
export type AnthropicToolResult = Extract<Reply, { vocabulary: "anthropic" }>["tool_result"];
/**
 * The `computer_call_output` input item of OpenAI's Responses API (openai-node's
 * `ResponseInputItem.ComputerCallOutput`: its `output` is a `computer_screenshot`), the same for
 * both generations of the tool.
 */
export type OpenaiComputerCallOutput = Extract<Reply, { vocabulary: "openai" }>["tool_result"] & {
  acknowledged_safety_checks?: unknown[];
};

/** The one method the adapters need; a `Hangar` client has it. */
export interface ComputerActionRunner {
  computerAction(params: CommandParams<"computer_action">): Promise<Reply>;
}

export interface ComputerToolOptions {
  /** The display size declared to the model (its coordinate space), or `auto`; default the screen's. */
  display?: { width: number; height: number } | "auto";
  /** A screenshot after every action (default true). */
  screenshot?: boolean;
}

/** Runs one tool call (one action, or OpenAI's batch) through `computer_action`; returns its `tool_result`. */
async function toolResultOf(
  hangar: ComputerActionRunner,
  vocabulary: "anthropic" | "openai",
  action: { action: unknown } | { actions: unknown[] },
  callId: string,
  options: ComputerToolOptions,
): Promise<Reply["tool_result"]> {
  const reply = await hangar.computerAction({
    ...(action as { action: Record<string, unknown> } | { actions: Record<string, unknown>[] }),
    vocabulary,
    call_id: callId,
    ...(options.display ? { display: options.display } : {}),
    ...(options.screenshot === false ? { screenshot: false } : {}),
  });
  return reply.tool_result;
}

/** Anthropic: a `tool_use` block of the `computer` tool → its `tool_result` block. */
export async function anthropicToolResult(
  hangar: ComputerActionRunner,
  toolUse: { id: string; input: unknown },
  options: ComputerToolOptions = {},
): Promise<AnthropicToolResult> {
  return (await toolResultOf(
    hangar,
    "anthropic",
    { action: toolUse.input },
    toolUse.id,
    options,
  )) as AnthropicToolResult;
}

/**
 * An OpenAI `computer_call` output item: `computer_use_preview` carries one `action`, the GA
 * `computer` tool a batch `actions` (openai-node's `ResponseComputerToolCall`).
 */
export interface OpenaiComputerCall {
  call_id: string;
  action?: unknown;
  actions?: unknown[] | null;
  pending_safety_checks?: unknown[];
}

/**
 * OpenAI: a `computer_call` output item of either generation → its `computer_call_output` input
 * item (a batch runs in order and stops at the first failure, with one screenshot at the end).
 * Pending safety checks are acknowledged only when `acknowledgeSafetyChecks` says so (after asking
 * a person).
 */
export async function openaiComputerCallOutput(
  hangar: ComputerActionRunner,
  call: OpenaiComputerCall,
  options: ComputerToolOptions & { acknowledgeSafetyChecks?: boolean } = {},
): Promise<OpenaiComputerCallOutput> {
  const output = (await toolResultOf(
    hangar,
    "openai",
    call.actions ? { actions: call.actions } : { action: call.action },
    call.call_id,
    options,
  )) as OpenaiComputerCallOutput;
  const checks = options.acknowledgeSafetyChecks ? call.pending_safety_checks : undefined;
  return {
    ...output,
    ...(checks?.length ? { acknowledged_safety_checks: checks } : {}),
  };
}

/** The AI SDK's tool output: text and PNG media parts. */
export type AiSdkToolOutput = {
  type: "content";
  value: ({ type: "text"; text: string } | { type: "media"; data: string; mediaType: string })[];
};

/**
 * The AI SDK: `execute` and `toModelOutput` for `anthropic.tools.computer_20250124({ displayWidthPx,
 * displayHeightPx, ...computerTool(hangar, { display }) })`.
 */
export function computerTool(hangar: ComputerActionRunner, options: ComputerToolOptions = {}) {
  return {
    execute: async (input: unknown): Promise<AnthropicToolResult> =>
      anthropicToolResult(hangar, { id: "", input }, options),
    toModelOutput: (result: AnthropicToolResult): AiSdkToolOutput => ({
      type: "content",
      value: result.content.map((block) =>
        block.type === "text"
          ? { type: "text", text: block.text }
          : { type: "media", data: block.source.data, mediaType: block.source.media_type },
      ),
    }),
  };
}
