/**
 * Anthropic's computer tool (`computer_20241022`, `computer_20250124`, `computer_20251124`): one
 * action object (the `tool_use.input`), and its `tool_result` block. The members of Claude's
 * computer toolset (toolset.ts) take the same inputs and run through the same steps.
 */
import { z } from "zod";
import { Bytes, bytesField } from "../../src/computer/core/bytes.js";
import type { Point } from "../../src/desktop/backend.js";
import { optionalEffect } from "../effect.js";
import {
  doubleClick,
  drag,
  leftClick,
  middleClick,
  mouseDown,
  mouseUp,
  moveCursor,
  pressKey,
  rightClick,
  scrollDirection,
  tripleClick,
  typeText,
} from "../input.js";
import { getCursorPosition } from "../screenshot.js";
import { sizeSchema } from "./display.js";
import { type ModelDesk, ModelError, pathOf, pointerAim, type Step, splitKeys } from "./steps.js";

/** Longest `wait` and `hold_key` Anthropic's tools accept, in seconds. */
export const MAX_DURATION_S = 100;

// The model's actions. Unknown fields are dropped, as a model may add some; absent and null alike.
const pair = z.tuple([z.number().finite(), z.number().finite()]);
const duration = z.number().min(0).max(MAX_DURATION_S);
const modifierText = z.string().max(100).nullish();
/** Modifiers held during a click or scroll: `text` as the tool documents it, or `key` as some agents send. */
const heldModifiers = { text: modifierText, key: modifierText };
const click = { coordinate: pair.nullish(), ...heldModifiers };
export const anthropicAction = z.discriminatedUnion("action", [
  z.object({
    action: z.literal("key"),
    text: z.string().min(1).max(1000),
    repeat: z.number().int().min(1).max(100).nullish(),
  }),
  z.object({ action: z.literal("hold_key"), text: z.string().min(1).max(100), duration }),
  z.object({ action: z.literal("type"), text: z.string().max(100_000) }),
  z.object({ action: z.literal("cursor_position") }),
  z.object({ action: z.literal("mouse_move"), coordinate: pair }),
  z.object({ action: z.literal("left_mouse_down"), coordinate: pair.nullish() }),
  z.object({ action: z.literal("left_mouse_up"), coordinate: pair.nullish() }),
  z.object({ action: z.literal("left_click"), ...click }),
  z.object({ action: z.literal("right_click"), ...click }),
  z.object({ action: z.literal("middle_click"), ...click }),
  z.object({ action: z.literal("double_click"), ...click }),
  z.object({ action: z.literal("triple_click"), ...click }),
  z.object({
    action: z.literal("left_click_drag"),
    start_coordinate: pair.nullish(),
    coordinate: pair,
    ...heldModifiers,
  }),
  z.object({
    action: z.literal("scroll"),
    coordinate: pair.nullish(),
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
export type AnthropicAction = z.infer<typeof anthropicAction>;

const CLICKS = {
  left_click: leftClick,
  right_click: rightClick,
  middle_click: middleClick,
  double_click: doubleClick,
  triple_click: tripleClick,
};

/**
 * The step of one action. Its points are checked now (off the display: the model's error), so
 * nothing runs for an action that cannot. `zoom` fits the region within the display, or (`fill`,
 * the toolset's) scales it to fill the display.
 */
export function anthropicStep(desk: ModelDesk, action: AnthropicAction, zoom: "fit" | "fill" = "fit"): Step {
  switch (action.action) {
    case "key":
      return {
        aim: { kind: "keyboard" },
        run: async () => {
          for (let i = 0; i < (action.repeat ?? 1); i++) await desk.run(pressKey, { key: action.text });
          return {};
        },
      };
    case "hold_key":
      return {
        aim: { kind: "keyboard" },
        run: async () => {
          await desk.holding(splitKeys(action.text), () => desk.pause(action.duration));
          return {};
        },
      };
    case "type":
      return {
        aim: { kind: "keyboard", typed: action.text },
        run: async () => {
          await desk.run(typeText, { text: action.text });
          return {};
        },
      };
    case "cursor_position":
      return {
        run: async () => {
          const { position } = await desk.run(getCursorPosition, {});
          const { x, y } = desk.mapping.toDisplay(position);
          return { text: `X=${x},Y=${y}` };
        },
      };
    case "mouse_move": {
      const to = desk.toScreen(action.coordinate);
      return { aim: pointerAim(to), run: () => desk.run(moveCursor, to).then(() => ({})) };
    }
    case "left_mouse_down":
    case "left_mouse_up": {
      const at = desk.point(action.coordinate);
      const command = action.action === "left_mouse_down" ? mouseDown : mouseUp;
      return { aim: pointerAim(at), run: () => desk.run(command, at).then(() => ({})) };
    }
    case "left_click":
    case "right_click":
    case "middle_click":
    case "double_click":
    case "triple_click": {
      const at = desk.point(action.coordinate);
      const modifiers = modifiersOf(action);
      const command = CLICKS[action.action];
      return { aim: pointerAim(at), run: () => desk.run(command, { ...at, modifiers }).then(() => ({})) };
    }
    case "left_click_drag": {
      const end = desk.toScreen(action.coordinate);
      const start = action.start_coordinate ? desk.toScreen(action.start_coordinate) : undefined;
      const modifiers = modifiersOf(action);
      return {
        aim: pointerAim(start ?? {}, end),
        run: async () => {
          const from: Point = start ?? (await desk.desktop.cursorPosition());
          await desk.holding(modifiers, () => desk.run(drag, { path: pathOf([from, end]) }));
          return {};
        },
      };
    }
    case "scroll": {
      const at = desk.point(action.coordinate);
      const modifiers = modifiersOf(action);
      return {
        aim: pointerAim(at),
        run: async () => {
          if (at.x !== undefined) await desk.run(moveCursor, at);
          if (action.scroll_amount === 0) return {};
          await desk.holding(modifiers, () =>
            desk.run(scrollDirection, { direction: action.scroll_direction, clicks: action.scroll_amount }),
          );
          return {};
        },
      };
    }
    case "wait":
      return { run: () => desk.pause(action.duration).then(() => ({})) };
    case "screenshot":
      return { run: async () => ({ image: await desk.screenshot() }) };
    case "zoom":
      return { run: async () => ({ image: await desk.zoom(action.region, zoom) }) };
  }
}

/**
 * The modifiers of a click, drag or scroll: its `text`, or its `key` where the agent put them
 * there (never dropped); both and different is the model's error.
 */
function modifiersOf(action: { text?: string | null; key?: string | null }): string[] {
  if (action.text != null && action.key != null && action.text !== action.key) {
    throw new ModelError(
      "Give the modifier keys to hold in `text` (or `key`), not two different ones in both.",
    );
  }
  return splitKeys(action.text ?? action.key);
}

export const textBlock = z.object({ type: z.literal("text"), text: z.string() });
export const imageBlock = z.object({
  type: z.literal("image"),
  source: z.object({
    type: z.literal("base64"),
    media_type: z.literal("image/png"),
    data: bytesField("the PNG, base64", { mimeType: "image/png" }),
  }),
});
export type ContentBlock = z.infer<typeof textBlock> | z.infer<typeof imageBlock>;

/** A PNG as a content block of a `tool_result`. */
export function pngBlock(png: Buffer): ContentBlock {
  return {
    type: "image",
    source: { type: "base64", media_type: "image/png", data: new Bytes(png, "image/png") },
  };
}

export const anthropicReply = z.object({
  vocabulary: z.literal("anthropic"),
  display: sizeSchema,
  is_error: z.boolean(),
  /** The action's own output (`cursor_position`) or the error sentence, also for the author. */
  text: z.string().optional(),
  /** The `tool_result` content block to send back in the next user message. */
  tool_result: z.object({
    type: z.literal("tool_result"),
    tool_use_id: z.string().optional(),
    content: z.array(z.union([textBlock, imageBlock])),
    is_error: z.boolean().optional(),
  }),
  ...optionalEffect,
});
