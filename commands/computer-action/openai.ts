/**
 * OpenAI's computer-use tool (`computer_use_preview`) and the GA `computer` tool: one action, or a
 * `computer_call`'s batch of actions, answered with one `computer_call_output` (an image only).
 */
import { z } from "zod";
import { Bytes, bytesField } from "../../src/computer/core/bytes.js";
import { effectReport, optionalEffect } from "../effect.js";
import {
  doubleClick,
  drag,
  hotkey,
  leftClick,
  middleClick,
  mouseDown,
  moveCursor,
  rightClick,
  scroll,
  typeText,
} from "../input.js";
import { sizeSchema } from "./display.js";
import { type ModelDesk, notches, pathOf, pointerAim, type Step } from "./steps.js";

/** OpenAI's `wait` carries no duration; its sample agents wait one second. */
export const OPENAI_WAIT_S = 1;

// The GA types (openai-node 7.x `ComputerAction`) allow `keys: null` where no key is held.
const openaiKeys = z.array(z.string().min(1).max(100)).max(8).nullish();
const openaiPoint = { x: z.number().finite(), y: z.number().finite(), keys: openaiKeys };
export const openaiAction = z.discriminatedUnion("type", [
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
export type OpenaiAction = z.infer<typeof openaiAction>;

const CLICKS = { left: leftClick, right: rightClick, wheel: middleClick };

/** The step of one action; its points are checked now (off the display: the model's error). */
export function openaiStep(desk: ModelDesk, action: OpenaiAction): Step {
  switch (action.type) {
    case "click": {
      const at = desk.toScreen([action.x, action.y]);
      const keys = action.keys ?? [];
      if (action.button === "back" || action.button === "forward") {
        const button = action.button;
        return {
          aim: pointerAim(at),
          run: async () => {
            await desk.holding(keys, async () => {
              await desk.run(mouseDown, { ...at, button });
              // Released on the desktop directly, like held keys, whatever happens.
              await desk.desktop.mouseButton(button, "up");
            });
            return {};
          },
        };
      }
      const command = CLICKS[action.button];
      return {
        aim: pointerAim(at),
        run: () => desk.run(command, { ...at, modifiers: keys }).then(() => ({})),
      };
    }
    case "double_click": {
      const at = desk.toScreen([action.x, action.y]);
      const modifiers = action.keys ?? [];
      return { aim: pointerAim(at), run: () => desk.run(doubleClick, { ...at, modifiers }).then(() => ({})) };
    }
    case "scroll": {
      const at = desk.toScreen([action.x, action.y]);
      return {
        aim: pointerAim(at),
        run: async () => {
          await desk.run(moveCursor, at);
          await desk.holding(action.keys ?? [], () =>
            // OpenAI's scroll_y is positive downwards, Hangar's wheel notches positive upwards.
            desk.run(scroll, { x: notches(action.scroll_x), y: -notches(action.scroll_y) }),
          );
          return {};
        },
      };
    }
    case "type":
      return {
        aim: { kind: "keyboard", typed: action.text },
        run: () => desk.run(typeText, { text: action.text }).then(() => ({})),
      };
    case "keypress":
      return {
        aim: { kind: "keyboard" },
        run: () => desk.run(hotkey, { keys: action.keys }).then(() => ({})),
      };
    case "wait":
      return { run: () => desk.pause(OPENAI_WAIT_S).then(() => ({})) };
    case "drag": {
      const path = action.path.map((p) => desk.toScreen([p.x, p.y]));
      return {
        aim: pointerAim(path[0], path[path.length - 1]),
        run: async () => {
          await desk.holding(action.keys ?? [], () => desk.run(drag, { path: pathOf(path) }));
          return {};
        },
      };
    }
    case "move": {
      const to = desk.toScreen([action.x, action.y]);
      return {
        aim: pointerAim(to),
        run: async () => {
          await desk.holding(action.keys ?? [], () => desk.run(moveCursor, to));
          return {};
        },
      };
    }
    case "screenshot":
      return { run: async () => ({ image: await desk.screenshot() }) };
  }
}

export const openaiReply = z.object({
  vocabulary: z.literal("openai"),
  display: sizeSchema,
  is_error: z.boolean(),
  /** The error sentence, for the author: the call output can carry only an image. */
  text: z.string().optional(),
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
  ...optionalEffect,
  effects: z
    .array(effectReport.nullable())
    .optional()
    .describe("A batch's: each action's effect, in order (null: it has none, or did not run)"),
});

/** The `computer_call_output` item of a call (`image`: the screenshot it carries). */
export function callOutput(callId: string | null | undefined, image?: Buffer) {
  return {
    type: "computer_call_output" as const,
    call_id: callId ?? undefined,
    ...(image !== undefined
      ? {
          output: {
            type: "computer_screenshot" as const,
            image_url: new Bytes(image, "image/png", { dataUrl: true }),
          },
        }
      : {}),
  };
}
