/**
 * `computer_action`: one action of a model's computer tool, exactly as the model emitted it
 * (Anthropic's `computer_20241022`/`computer_20250124`/`computer_20251124` or OpenAI's
 * `computer_use_preview`), run through the existing commands, answered in the shape that
 * vocabulary's tool result takes. The model's display size is in the request (stateless): points are
 * mapped from it to the screen, screenshots are scaled to it (stretched when the aspects differ),
 * `cursor_position` is mapped back.
 *
 * The model's mistakes (an unknown action, a point off the display, a key that does not exist) are
 * replies with `is_error: true` and a short sentence for the model; the author's (a bad display size,
 * an action that is neither vocabulary's) are `invalid_params`.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import { Bytes, bytesField } from "../src/computer/core/bytes.js";
import { type CommandContext, defineCommand } from "../src/computer/core/command.js";
import type { DesktopBackend, Point, Rect, Size } from "../src/desktop/backend.js";
import { normalizeKey } from "../src/desktop/keys.js";
import { takeScreenshot } from "../src/desktop/screenshot.js";

export type Vocabulary = "anthropic" | "openai";

/** Longest `wait` and `hold_key` Anthropic's tool accepts, in seconds. */
const MAX_DURATION_S = 100;
/** OpenAI's `wait` carries no duration; its sample agents wait one second. */
const OPENAI_WAIT_S = 1;
/** OpenAI's `scroll_x`/`scroll_y` are pixels; a wheel notch scrolls about this many. */
export const PIXELS_PER_NOTCH = 100;

/**
 * `auto` display sizes: Anthropic's tool works best at most about a megapixel (1280x800, its WXGA
 * recommendation) with the long edge within 1568; OpenAI resizes images so the short side is 768.
 */
export function autoDisplay(screen: Size, vocabulary: Vocabulary): Size {
  const scale =
    vocabulary === "anthropic"
      ? Math.min(
          1,
          Math.sqrt((1280 * 800) / (screen.width * screen.height)),
          1568 / Math.max(screen.width, screen.height),
        )
      : Math.min(
          1,
          768 / Math.min(screen.width, screen.height),
          2048 / Math.max(screen.width, screen.height),
        );
  return { width: Math.round(screen.width * scale), height: Math.round(screen.height * scale) };
}

/** Maps points between the model's display and the screen; each axis on its own (stretch). */
export class DisplayMapping {
  constructor(
    readonly display: Size,
    readonly screen: Size,
  ) {}

  /** The screen pixel under the centre of the model's pixel. */
  toScreen(point: Point): Point {
    return {
      x: this.axis(point.x, this.display.width, this.screen.width),
      y: this.axis(point.y, this.display.height, this.screen.height),
    };
  }

  /** The model's pixel under the centre of a screen pixel. */
  toDisplay(point: Point): Point {
    return {
      x: this.axis(point.x, this.screen.width, this.display.width),
      y: this.axis(point.y, this.screen.height, this.display.height),
    };
  }

  /** A region `[x0, y0, x1, y1]` of the model's display (x1, y1 exclusive) in screen pixels. */
  regionToScreen([x0, y0, x1, y1]: readonly number[]): Rect {
    const edge = (value: number, from: number, to: number) =>
      Math.min(to, Math.max(0, Math.round((value * to) / from)));
    const left = edge(x0, this.display.width, this.screen.width);
    const top = edge(y0, this.display.height, this.screen.height);
    return {
      x: left,
      y: top,
      width: Math.max(1, edge(x1, this.display.width, this.screen.width) - left),
      height: Math.max(1, edge(y1, this.display.height, this.screen.height) - top),
    };
  }

  private axis(value: number, from: number, to: number): number {
    return Math.min(to - 1, Math.max(0, Math.floor(((value + 0.5) * to) / from)));
  }
}

/** A mistake of the model: answered as a tool result with `is_error`, not as a failed command. */
class ModelError extends Error {}

const sizeSchema = z.object({
  width: z.number().int().min(1).max(16_384),
  height: z.number().int().min(1).max(16_384),
});

const textBlock = z.object({ type: z.literal("text"), text: z.string() });
const imageBlock = z.object({
  type: z.literal("image"),
  source: z.object({
    type: z.literal("base64"),
    media_type: z.literal("image/png"),
    data: bytesField("the PNG, base64", { mimeType: "image/png" }),
  }),
});
const common = {
  display: sizeSchema,
  is_error: z.boolean(),
  /** The action's own output (`cursor_position`) or the error sentence, also for the author. */
  text: z.string().optional(),
};
const anthropicReply = z.object({
  vocabulary: z.literal("anthropic"),
  ...common,
  /** The `tool_result` content block to send back in the next user message. */
  tool_result: z.object({
    type: z.literal("tool_result"),
    tool_use_id: z.string().optional(),
    content: z.array(z.union([textBlock, imageBlock])),
    is_error: z.boolean().optional(),
  }),
});
const openaiReply = z.object({
  vocabulary: z.literal("openai"),
  ...common,
  /** The `computer_call_output` input item to send back (it carries only an image). */
  tool_result: z.object({
    type: z.literal("computer_call_output"),
    call_id: z.string().optional(),
    output: z
      .object({
        type: z.literal("computer_screenshot"),
        image_url: bytesField("the PNG as a data: URL", { mimeType: "image/png", dataUrl: true }),
      })
      .optional(),
  }),
});
export const computerActionResult = z.discriminatedUnion("vocabulary", [anthropicReply, openaiReply]);
export type ComputerActionResult = z.infer<typeof computerActionResult>;

// The model's actions. Unknown fields are dropped, as a model may add some.
const pair = z.tuple([z.number().finite(), z.number().finite()]);
const duration = z.number().min(0).max(MAX_DURATION_S);
const modifierText = z.string().max(100).optional();
/** Modifiers held during a click or scroll: `text` as the tool documents it, or `key` as some agents send. */
const heldModifiers = { text: modifierText, key: modifierText };
const anthropicClick = { coordinate: pair.optional(), ...heldModifiers };
const anthropicAction = z.discriminatedUnion("action", [
  z.object({ action: z.literal("key"), text: z.string().min(1).max(1000) }),
  z.object({ action: z.literal("hold_key"), text: z.string().min(1).max(100), duration }),
  z.object({ action: z.literal("type"), text: z.string().max(100_000) }),
  z.object({ action: z.literal("cursor_position") }),
  z.object({ action: z.literal("mouse_move"), coordinate: pair }),
  z.object({ action: z.literal("left_mouse_down"), coordinate: pair.optional() }),
  z.object({ action: z.literal("left_mouse_up"), coordinate: pair.optional() }),
  z.object({ action: z.literal("left_click"), ...anthropicClick }),
  z.object({ action: z.literal("right_click"), ...anthropicClick }),
  z.object({ action: z.literal("middle_click"), ...anthropicClick }),
  z.object({ action: z.literal("double_click"), ...anthropicClick }),
  z.object({ action: z.literal("triple_click"), ...anthropicClick }),
  z.object({ action: z.literal("left_click_drag"), start_coordinate: pair.optional(), coordinate: pair }),
  z.object({
    action: z.literal("scroll"),
    coordinate: pair.optional(),
    scroll_direction: z.enum(["up", "down", "left", "right"]),
    scroll_amount: z.number().int().min(0).max(1000),
    ...heldModifiers,
  }),
  z.object({ action: z.literal("wait"), duration }),
  z.object({ action: z.literal("screenshot") }),
  z.object({
    action: z.literal("zoom"),
    region: z.tuple([z.number(), z.number(), z.number(), z.number()]),
  }),
]);

// The GA types (openai-node 7.x `ComputerAction`) allow `keys: null` where no key is held.
const openaiKeys = z.array(z.string().min(1).max(100)).max(8).nullish();
const openaiPoint = { x: z.number().finite(), y: z.number().finite(), keys: openaiKeys };
const openaiAction = z.discriminatedUnion("type", [
  z.object({
    type: z.literal("click"),
    ...openaiPoint,
    button: z.enum(["left", "right", "wheel", "back", "forward"]).default("left"),
  }),
  z.object({ type: z.literal("double_click"), ...openaiPoint }),
  z.object({
    type: z.literal("scroll"),
    ...openaiPoint,
    scroll_x: z.number().finite().default(0),
    scroll_y: z.number().finite().default(0),
  }),
  z.object({ type: z.literal("type"), text: z.string().max(100_000) }),
  z.object({ type: z.literal("keypress"), keys: z.array(z.string().min(1).max(100)).min(1).max(16) }),
  z.object({ type: z.literal("wait") }),
  z.object({
    type: z.literal("drag"),
    path: z
      .array(z.object({ x: z.number().finite(), y: z.number().finite() }))
      .min(1)
      .max(10_000),
    keys: openaiKeys,
  }),
  z.object({ type: z.literal("move"), ...openaiPoint }),
  z.object({ type: z.literal("screenshot") }),
]);

type AnthropicAction = z.infer<typeof anthropicAction>;
type OpenaiAction = z.infer<typeof openaiAction>;

/** What an action gives besides the screenshot after it. */
interface ActionOutput {
  text?: string;
  /** A PNG that replaces the screenshot after the action (`screenshot`, `zoom`). */
  image?: Buffer;
}

/** Runs one action against the desktop, in the model's display space. */
class ActionRunner {
  constructor(
    private readonly ctx: CommandContext,
    private readonly desktop: DesktopBackend,
    private readonly mapping: DisplayMapping,
  ) {}

  async anthropic(action: AnthropicAction): Promise<ActionOutput> {
    switch (action.action) {
      case "key":
        await this.run("press_key", { key: action.text });
        return {};
      case "hold_key":
        await this.holding(splitKeys(action.text), () => pause(action.duration, this.ctx.signal));
        return {};
      case "type":
        await this.run("type_text", { text: action.text });
        return {};
      case "cursor_position": {
        const { position } = (await this.run("get_cursor_position", {})) as { position: Point };
        const { x, y } = this.mapping.toDisplay(position);
        return { text: `X=${x},Y=${y}` };
      }
      case "mouse_move":
        await this.run("move_cursor", this.point(action.coordinate));
        return {};
      case "left_mouse_down":
      case "left_mouse_up":
        await this.run(
          action.action === "left_mouse_down" ? "mouse_down" : "mouse_up",
          this.point(action.coordinate),
        );
        return {};
      case "left_click":
      case "right_click":
      case "middle_click":
      case "double_click":
      case "triple_click":
        await this.run(action.action, {
          ...this.point(action.coordinate),
          modifiers: modifiersOf(action),
        });
        return {};
      case "left_click_drag": {
        const end = this.toScreen(action.coordinate);
        const start = action.start_coordinate
          ? this.toScreen(action.start_coordinate)
          : await this.desktop.cursorPosition();
        await this.run("drag", { path: [start, end].map(({ x, y }) => [x, y]) });
        return {};
      }
      case "scroll": {
        const modifiers = modifiersOf(action);
        if (action.coordinate) await this.run("move_cursor", this.point(action.coordinate));
        if (action.scroll_amount === 0) return {};
        await this.holding(modifiers, () =>
          this.run("scroll_direction", { direction: action.scroll_direction, clicks: action.scroll_amount }),
        );
        return {};
      }
      case "wait":
        await pause(action.duration, this.ctx.signal);
        return {};
      case "screenshot":
        return { image: await this.screenshot() };
      case "zoom":
        return { image: await this.zoom(action.region) };
    }
  }

  async openai(action: OpenaiAction): Promise<ActionOutput> {
    switch (action.type) {
      case "click": {
        const at = this.point([action.x, action.y]);
        const keys = action.keys ?? [];
        if (action.button === "back" || action.button === "forward") {
          const button = action.button;
          await this.holding(keys, async () => {
            await this.run("mouse_down", { ...at, button });
            // Released on the desktop directly, like held keys, whatever happens.
            await this.desktop.mouseButton(button, "up");
          });
        } else {
          const name = { left: "left_click", right: "right_click", wheel: "middle_click" }[action.button];
          await this.run(name, { ...at, modifiers: keys });
        }
        return {};
      }
      case "double_click":
        await this.run("double_click", { ...this.point([action.x, action.y]), modifiers: action.keys ?? [] });
        return {};
      case "scroll":
        await this.run("move_cursor", this.point([action.x, action.y]));
        await this.holding(action.keys ?? [], () =>
          // OpenAI's scroll_y is positive downwards, Hangar's wheel notches positive upwards.
          this.run("scroll", { x: notches(action.scroll_x), y: -notches(action.scroll_y) }),
        );
        return {};
      case "type":
        await this.run("type_text", { text: action.text });
        return {};
      case "keypress":
        await this.run("hotkey", { keys: action.keys });
        return {};
      case "wait":
        await pause(OPENAI_WAIT_S, this.ctx.signal);
        return {};
      case "drag": {
        const path = action.path.map((p) => this.toScreen([p.x, p.y])).map(({ x, y }) => [x, y]);
        await this.holding(action.keys ?? [], () => this.run("drag", { path }));
        return {};
      }
      case "move":
        await this.holding(action.keys ?? [], () =>
          this.run("move_cursor", this.point([action.x, action.y])),
        );
        return {};
      case "screenshot":
        return { image: await this.screenshot() };
    }
  }

  /** Throws the model's error when a point of an OpenAI action is off the display. */
  checkPoints(action: OpenaiAction): void {
    if ("path" in action) for (const p of action.path) this.toScreen([p.x, p.y]);
    else if ("x" in action) this.toScreen([action.x, action.y]);
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

  /** A region of the model's display at the screen's resolution, fitted within the display size. */
  private async zoom(region: readonly number[]): Promise<Buffer> {
    const [x0, y0, x1, y1] = region;
    const { width, height } = this.mapping.display;
    if (x1 <= x0 || y1 <= y0 || x0 < 0 || y0 < 0 || x1 > width || y1 > height) {
      throw new ModelError(
        `The zoom region must satisfy 0 <= x0 < x1 <= ${width} and 0 <= y0 < y1 <= ${height}.`,
      );
    }
    const shot = await takeScreenshot(this.desktop, {
      format: "png",
      quality: 95,
      region: this.mapping.regionToScreen(region),
      maxWidth: width,
      maxHeight: height,
    });
    return shot.data;
  }

  private toScreen([x, y]: readonly [number, number]): Point {
    const { width, height } = this.mapping.display;
    if (x < 0 || y < 0 || x >= width || y >= height) {
      throw new ModelError(`Coordinate (${x}, ${y}) is outside the ${width}x${height} display.`);
    }
    return this.mapping.toScreen({ x, y });
  }

  /** `{x, y}` on the screen for a command's point parameters, or nothing when the model gave none. */
  private point(pair?: readonly [number, number]): Partial<Point> {
    return pair ? this.toScreen(pair) : {};
  }

  /** Runs an existing command and returns its result; its failure becomes the model's error. */
  private async run(name: string, params: unknown): Promise<unknown> {
    const outcome = await this.ctx.run(name, params);
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
  private async holding(keys: readonly string[], work: () => Promise<unknown>): Promise<void> {
    const held: string[] = [];
    try {
      for (const key of keys) {
        await this.run("key_down", { key });
        held.push(normalizeKey(key));
      }
      await work();
    } finally {
      for (const key of held.reverse()) await this.desktop.key(key, "up");
    }
  }
}

/**
 * The modifiers of an Anthropic click or scroll: its `text`, or its `key` where the agent put them
 * there (never dropped); both and different is the model's error.
 */
function modifiersOf(action: { text?: string; key?: string }): string[] {
  if (action.text !== undefined && action.key !== undefined && action.text !== action.key) {
    throw new ModelError(
      "Give the modifier keys to hold in `text` (or `key`), not two different ones in both.",
    );
  }
  return splitKeys(action.text ?? action.key);
}

/** `ctrl+shift` or `ctrl shift` (Anthropic's modifier `text`) as key names. */
function splitKeys(text: string | undefined): string[] {
  return text ? text.split(/[+\s]+/).filter(Boolean) : [];
}

function notches(pixels: number): number {
  if (pixels === 0) return 0;
  return Math.sign(pixels) * Math.max(1, Math.round(Math.abs(pixels) / PIXELS_PER_NOTCH));
}

async function pause(seconds: number, signal: AbortSignal): Promise<void> {
  await sleep(seconds * 1000, undefined, { signal });
}

/** Which vocabulary an action is in: given, or told by its `action` (Anthropic) or `type` (OpenAI) field. */
function vocabularyOf(action: Record<string, unknown>, given?: Vocabulary | null): Vocabulary {
  if (given) return given;
  const anthropic = typeof action.action === "string";
  const openai = typeof action.type === "string";
  if (anthropic !== openai) return anthropic ? "anthropic" : "openai";
  throw new CommandError(
    "invalid_params",
    "Invalid params: cannot tell the action's vocabulary (an Anthropic action has an 'action' field, an " +
      "OpenAI one a 'type' field); give vocabulary",
  );
}

/** The first problem zod found, as one sentence for the model. */
function describeForModel(error: z.ZodError, field: string): string {
  const issue = error.issues[0];
  const where = issue.path.length > 0 ? issue.path.join(".") : field;
  if (issue.code === "invalid_union" && issue.path.length === 1 && issue.path[0] === field) {
    return `Unknown ${field}. ${issue.message}.`;
  }
  return `Invalid ${where}: ${issue.message}.`;
}

function reply(
  vocabulary: Vocabulary,
  display: Size,
  output: ActionOutput & { error?: string },
  callId?: string | null,
): ComputerActionResult {
  const isError = output.error !== undefined;
  const text = output.error ?? output.text;
  const head = { display, is_error: isError, ...(text !== undefined ? { text } : {}) };
  const id = callId ?? undefined;
  if (vocabulary === "anthropic") {
    const content: z.infer<typeof anthropicReply>["tool_result"]["content"] = [];
    if (text !== undefined) content.push({ type: "text", text });
    if (output.image !== undefined) {
      content.push({
        type: "image",
        source: { type: "base64", media_type: "image/png", data: new Bytes(output.image, "image/png") },
      });
    }
    const toolResult = {
      type: "tool_result" as const,
      tool_use_id: id,
      content,
      ...(isError ? { is_error: true } : {}),
    };
    return { vocabulary, ...head, tool_result: toolResult };
  }
  const image = output.image;
  return {
    vocabulary,
    ...head,
    tool_result: {
      type: "computer_call_output",
      call_id: id,
      ...(image !== undefined
        ? {
            output: {
              type: "computer_screenshot",
              image_url: new Bytes(image, "image/png", { dataUrl: true }),
            },
          }
        : {}),
    },
  };
}

const actionObject = z.record(z.string(), z.unknown());
/** The most actions one OpenAI `computer_call` may carry here. */
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
  /** Given as a batch (`actions`): errors name the action's index. */
  batch: boolean;
  callId?: string | null;
}

/** What to run, from exactly one of `action`, `actions` and `computer_call`. */
function requestOf(params: {
  action?: Record<string, unknown> | null;
  actions?: Record<string, unknown>[] | null;
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
  const actions = params.actions ?? call?.actions ?? undefined;
  const callId = params.call_id ?? call?.call_id;
  if (actions) {
    if (params.vocabulary === "anthropic") {
      throw new CommandError(
        "invalid_params",
        "Invalid params: a batch of actions is OpenAI's; vocabulary must be openai",
      );
    }
    return { vocabulary: "openai", actions, batch: true, callId };
  }
  const action = (params.action ?? call?.action) as Record<string, unknown>;
  const vocabulary = call ? "openai" : vocabularyOf(action, params.vocabulary);
  return { vocabulary, actions: [action], batch: false, callId };
}

/** Seconds an action may wait (`wait`, `hold_key`) and characters it types, for the deadline. */
function actionCost(action: Record<string, unknown>): number {
  const seconds = typeof action.duration === "number" ? Math.min(MAX_DURATION_S, action.duration) : 0;
  const wait = action.type === "wait" ? OPENAI_WAIT_S : 0;
  const typed = typeof action.text === "string" ? action.text.length * 10 : 0;
  return (seconds + wait) * 1000 + typed + 1000;
}

/**
 * Runs the actions in order and stops at the first that fails. Every action is checked (its shape,
 * its points on the display) before the first runs, so a batch with a bad action does nothing.
 */
async function runActions(runner: ActionRunner, request: Request): Promise<ActionOutput> {
  const label = (i: number) => (request.batch ? `actions[${i}]: ` : "");
  const parsed = request.actions.map((action, i) => {
    if (request.vocabulary === "anthropic") {
      const checked = anthropicAction.safeParse(action);
      if (!checked.success) throw new ModelError(label(i) + describeForModel(checked.error, "action"));
      return { vocabulary: "anthropic" as const, action: checked.data };
    }
    const checked = openaiAction.safeParse(action);
    if (!checked.success) throw new ModelError(label(i) + describeForModel(checked.error, "type"));
    try {
      runner.checkPoints(checked.data);
    } catch (err) {
      if (err instanceof ModelError) throw new ModelError(label(i) + err.message);
      throw err;
    }
    return { vocabulary: "openai" as const, action: checked.data };
  });
  let output: ActionOutput = {};
  for (const [i, step] of parsed.entries()) {
    try {
      output =
        step.vocabulary === "anthropic"
          ? await runner.anthropic(step.action)
          : await runner.openai(step.action);
    } catch (err) {
      if (!(err instanceof ModelError) || !request.batch) throw err;
      const rest = parsed.length - i - 1;
      throw new ModelError(
        `${label(i)}${String(request.actions[i].type)} failed: ${err.message} ${i} action${i === 1 ? "" : "s"} before it ran` +
          `${rest > 0 ? `, the ${rest} after it did not` : ""}.`,
      );
    }
  }
  return output;
}

export const computerAction = defineCommand({
  name: "computer_action",
  description:
    "Runs one action of Anthropic's computer tool or OpenAI's computer-use tool, or a whole OpenAI computer_call " +
    "(its batch of actions in order, stopping at the first failure), as the model emitted it, in the model's " +
    "display space, and returns that vocabulary's tool result (with a screenshot).",
  params: z.object({
    action: actionObject
      .nullish()
      .describe("One action exactly as the model emitted it (Anthropic's `input`, OpenAI's `action`)"),
    actions: actionsParam
      .nullish()
      .describe(
        "OpenAI's batch (the GA computer tool's computer_call.actions): run in order, stopping at the first failure",
      ),
    computer_call: computerCall
      .nullish()
      .describe("A whole OpenAI computer_call item: its action or actions run, its call_id is echoed"),
    vocabulary: z.enum(["anthropic", "openai"]).nullish().describe("Inferred from the action when omitted"),
    display: z
      .union([z.literal("auto"), sizeSchema])
      .nullish()
      .describe(
        "The display size the model was given (its coordinates), 'auto' for one Hangar chooses with the " +
          "screen's aspect, or omitted for the screen's own size",
      ),
    screenshot: z.boolean().default(true).describe("Reply with a screenshot after the action(s)"),
    call_id: z
      .string()
      .max(200)
      .nullish()
      .describe("The tool call's id (Anthropic's tool_use id, OpenAI's call_id), echoed in tool_result"),
  }),
  result: computerActionResult,
  deadlineMs: ({ action, actions, computer_call }) => {
    const list = action ? [action] : (actions ?? computer_call?.actions ?? [computer_call?.action ?? {}]);
    return 30_000 + list.reduce((sum: number, one) => sum + actionCost(one), 0);
  },
  handler: async (params, ctx) => {
    const request = requestOf(params);
    const { vocabulary } = request;
    const desktop = await ctx.desktop();
    const screen = await desktop.screenSize();
    const display = params.display === "auto" ? autoDisplay(screen, vocabulary) : (params.display ?? screen);
    const runner = new ActionRunner(ctx, desktop, new DisplayMapping(display, screen));
    let output: ActionOutput & { error?: string };
    try {
      output = await runActions(runner, request);
    } catch (err) {
      if (!(err instanceof ModelError)) throw err;
      output = { error: err.message };
    }
    // OpenAI's call output is an image, also after an error; Anthropic's error is its sentence alone.
    const wantsShot = params.screenshot && output.image === undefined;
    if (wantsShot && (vocabulary === "openai" || output.error === undefined)) {
      output.image = await runner.screenshot();
    }
    return reply(vocabulary, display, output, request.callId);
  },
});

export default [computerAction];
