/**
 * Claude's computer toolset (`computer_toolset_20260801`) on a Hangar desktop: the Anthropic SDK's
 * `BetaAbstractComputerToolset20260801` with every member forwarded, as the member `tool_use` block
 * it is, to the server's `computer_action`, which runs it in the display size the model is shown
 * (screenshots scaled to it, coordinates scaled back) and answers its `tool_result`; the SDK's
 * pipeline (the member gate of `configs`, `confirm`, one call at a time, the rendering) stays the
 * SDK's.
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
import { clientOf, type HangarTarget } from "./connect.js";
import type { CommandParams, CommandResult, Hangar } from "./index.js";

/** The toolset's `tool_result` block, as `computer_action` answers it. */
type ToolResult = NonNullable<
  Extract<CommandResult<"computer_action">, { vocabulary: "toolset" }>["tool_result"]
>;

export interface HangarComputerToolsetOptions extends BetaComputerToolsetOptions {
  /**
   * The size of the screenshots the model sees, in which it gives its coordinates: `auto` (default)
   * is the screen's aspect at about a megapixel (1280x800 for a 16:10 screen), within the model's
   * image limits; or a size; fixed for the session.
   */
  display?: { width: number; height: number } | "auto";
  /**
   * Wait after each pointer and keyboard member for a sign that it had an effect, and tell the model
   * (`Effect: confirmed (…)` after the acknowledgment); default false.
   */
  verify?: boolean;
}

export class HangarComputerToolset extends BetaAbstractComputerToolset20260801 {
  /** The client every member goes through. */
  readonly hangar: Hangar;
  private readonly display: { width: number; height: number } | "auto";
  private readonly verify: boolean;
  private readonly owned: boolean;

  /**
   * @param target the computer server's URL, a `Hangar` client's options, or a `Hangar` client (which
   *   stays open at `close()`; a client made here is closed with the toolset)
   */
  constructor(target: HangarTarget, options: HangarComputerToolsetOptions = {}) {
    const { display = "auto", verify = false, ...toolset } = options;
    super(toolset);
    ({ hangar: this.hangar, owned: this.owned } = clientOf(target));
    this.display = display;
    this.verify = verify;
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
    if (reply.vocabulary !== "toolset" || !reply.tool_result) {
      throw new ToolError("computer_action did not answer as the computer toolset");
    }
    return memberResult(name, reply.tool_result);
  }

  override async close(): Promise<void> {
    await super.close();
    if (this.owned) await this.hangar.close();
  }

  /** The member as `computer_action` takes it: the `tool_use` block the model emitted. */
  private request(
    ctx: BetaToolsetCallContext,
    name: BetaComputerMemberName,
    input: BetaComputerMemberInput,
  ): CommandParams<"computer_action"> {
    const id = ctx.toolUse?.id ?? "toolu_hangar";
    return {
      action: { type: "tool_use", id, name, input, toolset_name: this.toolsetName },
      display: this.display,
      ...(this.verify ? { verify: true } : {}),
    };
  }
}

/**
 * The server's `tool_result` as the member's result: the image of `screenshot` and `zoom`, the
 * point of `cursor_position`, else the line after its acknowledgment (the effect, when verified),
 * since the SDK writes the acknowledgment itself; an error result is the model's error, with the
 * server's sentence.
 */
function memberResult(name: BetaComputerMemberName, result: ToolResult): BetaComputerMemberResult {
  const texts = result.content.flatMap((block) => (block.type === "text" ? [block.text] : []));
  const text = texts.join(" ");
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
  return texts.slice(1).join(" ") || undefined;
}
