/**
 * Claude's computer toolset (`computer_toolset_20260801`) on a Hangar desktop: the Anthropic SDK's
 * `BetaAbstractComputerToolset20260801` with every member forwarded to the server's
 * `computer_action`, which runs it in the display size the model is shown (screenshots scaled to
 * it, coordinates scaled back) and answers its `tool_result`; the SDK's pipeline (the member gate of
 * `configs`, `confirm`, one call at a time, the rendering) stays the SDK's.
 *
 * @example
 * const desktop = new HangarComputerToolset("http://127.0.0.1:8000", { confirm });
 * const runner = new Anthropic().beta.messages.toolRunner({ model, max_tokens: 4096, tools: [desktop], messages });
 */
import {
  BetaAbstractComputerToolset20260801,
  type BetaComputerMemberResult,
  type BetaComputerToolsetOptions,
  type BetaToolsetCallContext,
  ToolError,
} from "@anthropic-ai/sdk/helpers/beta/toolsets";
import type { BetaComputerMemberInput, BetaComputerMemberName } from "@anthropic-ai/sdk/resources/beta";
import type { AnthropicToolResult } from "./agents.js";
import { clientOf, type HangarTarget } from "./connect.js";
import type { CommandParams, Hangar } from "./index.js";

export interface HangarComputerToolsetOptions extends BetaComputerToolsetOptions {
  /**
   * The size of the screenshots the model sees, in which it gives its coordinates: `auto` (default)
   * is the screen's aspect at about a megapixel (1280x800 for a 16:10 screen), within the model's
   * image limits; or a size; fixed for the session.
   */
  display?: { width: number; height: number } | "auto";
}

export class HangarComputerToolset extends BetaAbstractComputerToolset20260801 {
  /** The client every member goes through. */
  readonly hangar: Hangar;
  private readonly display: { width: number; height: number } | "auto";
  private readonly owned: boolean;

  /**
   * @param target the computer server's URL, a `Hangar` client's options, or a `Hangar` client (which
   *   stays open at `close()`; a client made here is closed with the toolset)
   */
  constructor(target: HangarTarget, options: HangarComputerToolsetOptions = {}) {
    const { display = "auto", ...toolset } = options;
    super(toolset);
    ({ hangar: this.hangar, owned: this.owned } = clientOf(target));
    this.display = display;
  }

  /** Every member, forwarded: the server answers the `tool_result`, read back into the member's result. */
  protected override async execute(
    ctx: BetaToolsetCallContext,
    name: BetaComputerMemberName,
    input: BetaComputerMemberInput,
  ): Promise<BetaComputerMemberResult> {
    const reply = await this.hangar.computerAction(this.request(ctx, name, input), {
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    });
    return memberResult(name, reply.tool_result as AnthropicToolResult);
  }

  override async close(): Promise<void> {
    await super.close();
    if (this.owned) await this.hangar.close();
  }

  /**
   * The member as `computer_action` takes it: an action of Anthropic's computer tool, whose action
   * names and fields the toolset's members share (`key`'s `repeat` as a sequence of the key), with
   * only the pictures the model asks for.
   */
  private request(
    ctx: BetaToolsetCallContext,
    name: BetaComputerMemberName,
    input: BetaComputerMemberInput,
  ): CommandParams<"computer_action"> {
    const action: Record<string, unknown> = { ...input, action: name };
    if (name === "key" && "repeat" in input && input.repeat != null) {
      const { repeat, text } = input as { repeat: unknown; text: unknown };
      if (!Number.isInteger(repeat) || (repeat as number) < 1 || (repeat as number) > 100) {
        throw new ToolError("repeat: expected a whole number from 1 to 100");
      }
      if (typeof text === "string")
        action.text = Array(repeat as number)
          .fill(text)
          .join(" ");
    }
    if (name === "left_click_drag" && "text" in input && input.text) {
      throw new ToolError("left_click_drag: holding keys during a drag is not supported here");
    }
    return {
      action,
      vocabulary: "anthropic",
      display: this.display,
      screenshot: false,
      ...(ctx.toolUse?.id ? { call_id: ctx.toolUse.id } : {}),
    };
  }
}

/**
 * The server's `tool_result` as the member's result: the image of `screenshot` and `zoom`, the
 * point of `cursor_position`, else its text (a line after the SDK's acknowledgment); an error
 * result is the model's error, with the server's sentence.
 */
function memberResult(name: BetaComputerMemberName, result: AnthropicToolResult): BetaComputerMemberResult {
  const text = result.content.flatMap((block) => (block.type === "text" ? [block.text] : [])).join(" ");
  if (result.is_error) throw new ToolError(text || `${name} failed`);
  if (name === "screenshot" || name === "zoom") {
    const image = result.content.find((block) => block.type === "image");
    if (image?.type !== "image") throw new ToolError(`${name} returned no image`);
    return { data: image.source.data, mediaType: image.source.media_type };
  }
  if (name === "cursor_position") {
    const point = /X=(-?\d+),\s*Y=(-?\d+)/.exec(text);
    if (!point) throw new ToolError("cursor_position returned no position");
    return { x: Number(point[1]), y: Number(point[2]) };
  }
  return text || undefined;
}
