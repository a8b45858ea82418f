/**
 * Pointer and keyboard commands. All of them are `input: true`: they run one at a time through the
 * registry's input queue, so two clients never interleave a drag or a hotkey.
 */
import { z } from "zod";
import { defineCommand } from "../src/computer/command.js";
import type { DesktopBackend, MouseButton } from "../src/desktop/backend.js";
import { normalizeCombo, normalizeKey } from "../src/desktop/keys.js";

const coordinate = z.number().finite();
const optionalPoint = {
  x: coordinate.nullish().describe("Move here first (with y)"),
  y: coordinate.nullish().describe("Move here first (with x)"),
};
const buttonParam = z
  .preprocess(
    (value) => (typeof value === "string" ? value.trim().toLowerCase() : value),
    z.enum(["left", "right", "middle"]),
  )
  .default("left");
const modifiersParam = z
  .array(z.string().min(1))
  .max(8)
  .nullish()
  .describe('Keys held during the click, e.g. ["ctrl", "shift"]');
const empty = z.object({});

async function moveIfGiven(desktop: DesktopBackend, x?: number | null, y?: number | null) {
  if (x !== undefined && x !== null && y !== undefined && y !== null) await desktop.moveCursor({ x, y });
}

/** Runs `action` with the modifier keys held, releasing them (in reverse) whatever happens. */
async function withModifiers(
  desktop: DesktopBackend,
  modifiers: readonly string[],
  action: () => Promise<void>,
) {
  const keys = modifiers.map((k) => normalizeKey(k, "modifier"));
  const pressed: string[] = [];
  try {
    for (const key of keys) {
      await desktop.key(key, "down");
      pressed.push(key);
    }
    await action();
  } finally {
    for (const key of pressed.reverse()) await desktop.key(key, "up");
  }
}

async function click(desktop: DesktopBackend, button: MouseButton, count: number) {
  for (let i = 0; i < count; i++) {
    await desktop.mouseButton(button, "down");
    await desktop.mouseButton(button, "up");
  }
}

function clickCommand(
  name: string,
  button: MouseButton,
  count: number,
  description: string,
  aliases?: string[],
) {
  return defineCommand({
    name,
    aliases,
    description,
    input: true,
    params: z.object({ ...optionalPoint, modifiers: modifiersParam }),
    result: empty,
    handler: async ({ x, y, modifiers }, ctx) => {
      const desktop = await ctx.desktop();
      await moveIfGiven(desktop, x, y);
      await withModifiers(desktop, modifiers ?? [], () => click(desktop, button, count));
      return {};
    },
  });
}

export const leftClick = clickCommand(
  "left_click",
  "left",
  1,
  "Left click, at x,y when given (else where the pointer is), with optional modifier keys held.",
  ["click", "tap"],
);
export const rightClick = clickCommand("right_click", "right", 1, "Right click, at x,y when given.");
export const middleClick = clickCommand("middle_click", "middle", 1, "Middle click, at x,y when given.");
export const doubleClick = clickCommand("double_click", "left", 2, "Left double click, at x,y when given.");
export const tripleClick = clickCommand(
  "triple_click",
  "left",
  3,
  "Left triple click (selects a line or paragraph), at x,y when given.",
);

export const moveCursor = defineCommand({
  name: "move_cursor",
  description: "Moves the pointer to x,y (screen pixels).",
  input: true,
  params: z.object({ x: coordinate, y: coordinate }),
  result: empty,
  handler: async ({ x, y }, ctx) => {
    await (await ctx.desktop()).moveCursor({ x, y });
    return {};
  },
});

function buttonCommand(name: string, action: "down" | "up", description: string) {
  return defineCommand({
    name,
    description,
    input: true,
    params: z.object({ ...optionalPoint, button: buttonParam }),
    result: empty,
    handler: async ({ x, y, button }, ctx) => {
      const desktop = await ctx.desktop();
      await moveIfGiven(desktop, x, y);
      await desktop.mouseButton(button, action);
      return {};
    },
  });
}

export const mouseDown = buttonCommand(
  "mouse_down",
  "down",
  "Presses a mouse button (and holds it), at x,y when given.",
);
export const mouseUp = buttonCommand("mouse_up", "up", "Releases a mouse button, at x,y when given.");

const DRAG_STEPS = 10;

/** Holds `button` along the points; an aborted `signal` stops it at the next step (and releases). */
async function dragAlong(
  desktop: DesktopBackend,
  points: readonly { x: number; y: number }[],
  button: MouseButton,
  signal: AbortSignal,
) {
  await desktop.mouseButton(button, "down");
  try {
    let from = points[0];
    for (const to of points.slice(1)) {
      for (let step = 1; step <= DRAG_STEPS; step++) {
        signal.throwIfAborted();
        await desktop.moveCursor({
          x: from.x + ((to.x - from.x) * step) / DRAG_STEPS,
          y: from.y + ((to.y - from.y) * step) / DRAG_STEPS,
        });
      }
      from = to;
    }
  } finally {
    await desktop.mouseButton(button, "up");
  }
}

export const dragTo = defineCommand({
  name: "drag_to",
  description: "Presses a button where the pointer is, moves to x,y and releases it.",
  input: true,
  params: z.object({
    x: coordinate,
    y: coordinate,
    button: buttonParam,
    duration: z
      .number()
      .min(0)
      .max(60)
      .default(0.5)
      .describe("Accepted for compatibility; the move is immediate"),
  }),
  result: empty,
  handler: async ({ x, y, button }, ctx) => {
    const desktop = await ctx.desktop();
    const start = await desktop.cursorPosition();
    await dragAlong(desktop, [start, { x, y }], button, ctx.signal);
    return {};
  },
});

export const drag = defineCommand({
  name: "drag",
  description: "Moves to the first point, presses a button, follows the path and releases at the last point.",
  input: true,
  params: z.object({
    path: z
      .array(z.tuple([coordinate, coordinate]))
      .min(1, "Path is empty")
      .max(10_000),
    button: buttonParam,
    duration: z
      .number()
      .min(0)
      .max(60)
      .default(0.5)
      .describe("Accepted for compatibility; the move is immediate"),
  }),
  result: empty,
  handler: async ({ path, button }, ctx) => {
    const desktop = await ctx.desktop();
    const points = path.map(([x, y]) => ({ x, y }));
    await desktop.moveCursor(points[0]);
    await dragAlong(desktop, points, button, ctx.signal);
    return {};
  },
});

const notches = z.number().int().min(-1000).max(1000);

export const scroll = defineCommand({
  name: "scroll",
  description:
    "Turns the wheel where the pointer is, by x (horizontal, positive = right) and y (vertical, positive = up) notches.",
  input: true,
  params: z.object({ x: notches, y: notches }),
  result: empty,
  handler: async ({ x, y }, ctx) => {
    await (await ctx.desktop()).scroll(x, y);
    return {};
  },
});

const clicksParam = z.number().int().min(1).max(1000).default(1);

function scrollByCommand(name: string, sign: 1 | -1, description: string) {
  return defineCommand({
    name,
    description,
    input: true,
    params: z.object({ clicks: clicksParam }),
    result: empty,
    handler: async ({ clicks }, ctx) => {
      await (await ctx.desktop()).scroll(0, sign * clicks);
      return {};
    },
  });
}

export const scrollUp = scrollByCommand("scroll_up", 1, "Scrolls up by `clicks` wheel notches.");
export const scrollDown = scrollByCommand("scroll_down", -1, "Scrolls down by `clicks` wheel notches.");

const DIRECTIONS = { up: [0, 1], down: [0, -1], left: [-1, 0], right: [1, 0] } as const;

export const scrollDirection = defineCommand({
  name: "scroll_direction",
  description: "Scrolls up, down, left or right by `clicks` wheel notches.",
  input: true,
  params: z.object({
    direction: z.string().transform((value, issue) => {
      const key = value.trim().toLowerCase();
      if (key in DIRECTIONS) return key as keyof typeof DIRECTIONS;
      issue.addIssue({
        code: "custom",
        message: `Invalid direction: ${value}. Use 'up', 'down', 'left', or 'right'.`,
      });
      return z.NEVER;
    }),
    clicks: clicksParam,
  }),
  result: empty,
  handler: async ({ direction, clicks }, ctx) => {
    const [dx, dy] = DIRECTIONS[direction];
    await (await ctx.desktop()).scroll(dx * clicks, dy * clicks);
    return {};
  },
});

export const typeText = defineCommand({
  name: "type_text",
  aliases: ["type"],
  description: "Types text exactly, any Unicode (symbols, accents, CJK, emoji) on any keyboard layout.",
  input: true,
  params: z.object({ text: z.string().max(100_000) }),
  result: empty,
  deadlineMs: ({ text }) => 30_000 + text.length * 10,
  handler: async ({ text }, ctx) => {
    await (await ctx.desktop()).typeText(text, ctx.signal);
    return {};
  },
});

const keyParam = z.string().min(1).max(100);

export const pressKey = defineCommand({
  name: "press_key",
  aliases: ["key"],
  description:
    "Presses and releases one key: a name (enter, esc, f5, pagedown, ctrl, win, …) or one character.",
  input: true,
  params: z.object({ key: keyParam }),
  result: empty,
  handler: async ({ key }, ctx) => {
    const name = normalizeKey(key);
    const desktop = await ctx.desktop();
    await desktop.key(name, "down");
    await desktop.key(name, "up");
    return {};
  },
});

function keyCommand(name: string, action: "down" | "up", description: string) {
  return defineCommand({
    name,
    description,
    input: true,
    params: z.object({ key: keyParam }),
    result: empty,
    handler: async ({ key }, ctx) => {
      const keyName = normalizeKey(key);
      await (await ctx.desktop()).key(keyName, action);
      return {};
    },
  });
}

export const keyDown = keyCommand("key_down", "down", "Presses a key and holds it until key_up.");
export const keyUp = keyCommand("key_up", "up", "Releases a key held by key_down.");

export const hotkey = defineCommand({
  name: "hotkey",
  description:
    "Presses a key combination: holds every key but the last in order, taps the last, releases the others " +
    'in reverse (e.g. ["ctrl", "shift", "t"]).',
  input: true,
  params: z.object({ keys: z.array(keyParam).min(1, "keys is empty").max(16) }),
  result: empty,
  handler: async ({ keys }, ctx) => {
    const names = normalizeCombo(keys);
    const desktop = await ctx.desktop();
    const last = names[names.length - 1];
    await withModifiers(desktop, names.slice(0, -1), async () => {
      await desktop.key(last, "down");
      await desktop.key(last, "up");
    });
    return {};
  },
});

export default [
  leftClick,
  rightClick,
  middleClick,
  doubleClick,
  tripleClick,
  moveCursor,
  mouseDown,
  mouseUp,
  dragTo,
  drag,
  scroll,
  scrollUp,
  scrollDown,
  scrollDirection,
  typeText,
  pressKey,
  keyDown,
  keyUp,
  hotkey,
];
