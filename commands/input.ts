/**
 * Pointer and keyboard commands. All of them are `input: true`: they run one at a time through the
 * registry's input queue, so two clients never interleave a drag or a hotkey. Those that go to a
 * point are `pointer: true`: the timeline draws where they went. Each answers `effect` and
 * `evidence` (effect.ts): whether it looks like it worked, waited for with `verify: true`.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import { type CommandContext, defineCommand } from "../src/computer/core/command.js";
import type { DesktopBackend, MouseButton, Point } from "../src/desktop/backend.js";
import type { Aim } from "../src/desktop/effect.js";
import { normalizeCombo, normalizeKey, parseKeySequence } from "../src/desktop/keys.js";
import { effectFields, type VerifyParams, verifyParams, withEffect } from "./effect.js";

const coordinate = z.number().finite();
/** x and y, or `coordinate: [x, y]` as Anthropic's computer tool sends it. */
const pointFields = {
  x: coordinate.nullish().describe("Move here first (with y)"),
  y: coordinate.nullish().describe("Move here first (with x)"),
  coordinate: z
    .tuple([coordinate, coordinate])
    .nullish()
    .describe("[x, y] instead of x and y (the spelling of Anthropic's computer tool)"),
};
type PointParams = { x?: number | null; y?: number | null; coordinate?: [number, number] | null };

/** Refuses half a point (x without y), and x/y given together with `coordinate`. */
function wholePoint(required: boolean) {
  return (p: PointParams, ctx: z.RefinementCtx) => {
    const hasX = p.x !== undefined && p.x !== null;
    const hasY = p.y !== undefined && p.y !== null;
    const hasPair = p.coordinate !== undefined && p.coordinate !== null;
    if (hasX !== hasY) {
      ctx.addIssue({
        code: "custom",
        path: [hasX ? "y" : "x"],
        message: "x and y go together: give both or neither",
      });
    } else if (hasPair && hasX) {
      ctx.addIssue({
        code: "custom",
        path: ["coordinate"],
        message: "give either coordinate or x and y, not both",
      });
    } else if (required && !hasPair && !hasX) {
      ctx.addIssue({ code: "custom", path: ["x"], message: "required: x and y (or coordinate)" });
    }
  };
}

/** The point of validated params, if any. */
function pointOf(p: PointParams): { x: number; y: number } | undefined {
  if (p.coordinate) return { x: p.coordinate[0], y: p.coordinate[1] };
  return p.x !== undefined && p.x !== null && p.y !== undefined && p.y !== null
    ? { x: p.x, y: p.y }
    : undefined;
}
const buttonParam = z
  .preprocess(
    (value) => (typeof value === "string" ? value.trim().toLowerCase() : value),
    z.enum(["left", "right", "middle", "back", "forward"]),
  )
  .default("left");
const modifiersParam = normalized(z.array(z.string().min(1)).max(8), (keys: string[]) =>
  keys.map((key) => normalizeKey(key, "modifier")),
)
  .nullish()
  .describe('Keys held during the click, e.g. ["ctrl", "shift"]');
/** What a keyboard command answers: whether it looks like it worked. */
const keyResult = z.object(effectFields);
/**
 * What a pointer command answers: where the pointer ended, read back from the desktop after the
 * action, so that a client can tell a click that landed elsewhere (a clamped point, another
 * client's move) from one that landed where it aimed; and whether it looks like it worked.
 */
const pointerResult = z.object({
  position: z
    .object({ x: z.number(), y: z.number() })
    .describe("Where the pointer is after the action, in screen pixels"),
  ...effectFields,
});

async function pointerEnded(desktop: DesktopBackend): Promise<{ position: Point }> {
  return { position: await desktop.cursorPosition() };
}

/** A pointer action's aim: where the pointer ended, and where it started when given. */
const aimedAt =
  (...from: Point[]) =>
  ({ position }: { position: Point }): Aim => ({ kind: "pointer", points: [...from, position] });

/** Runs a pointer action inside a check of its effect; the answer is where the pointer ended. */
function pointerAction(
  ctx: CommandContext,
  params: VerifyParams,
  action: (desktop: DesktopBackend) => Promise<unknown>,
  from: Point[] = [],
) {
  return withEffect(
    ctx,
    params,
    async (desktop) => {
      await action(desktop);
      return pointerEnded(desktop);
    },
    aimedAt(...from),
  );
}

/** Runs a keyboard action inside a check of its effect (`typed`: the text it types). */
function keyAction(
  ctx: CommandContext,
  params: VerifyParams,
  action: (desktop: DesktopBackend) => Promise<unknown>,
  typed?: string,
) {
  const aim: Aim = { kind: "keyboard", typed };
  return withEffect(
    ctx,
    params,
    (desktop) => action(desktop).then(() => ({})),
    () => aim,
  );
}

async function moveIfGiven(desktop: DesktopBackend, params: PointParams) {
  const point = pointOf(params);
  if (point) await desktop.moveCursor(point);
}

/**
 * Runs `action` with the modifier keys held (canonical names: the parameter types normalize them),
 * releasing them (in reverse) whatever happens.
 */
async function withModifiers(
  desktop: DesktopBackend,
  modifiers: readonly string[],
  action: () => Promise<void>,
) {
  const pressed: string[] = [];
  try {
    for (const key of modifiers) {
      await desktop.key(key, "down");
      pressed.push(key);
    }
    await action();
  } finally {
    for (const key of pressed.reverse()) await desktop.key(key, "up");
  }
}

/**
 * The pause between the clicks of a double or triple click: well inside every toolkit's double-click
 * time (400–500 ms), and long enough that a window manager does not lose the second click (with no
 * gap openbox dropped one in four; with 20 ms none of 30).
 */
const MULTI_CLICK_GAP_MS = 30;

/** `count` clicks of `button`, at `at` when given, with the multi-click gap between them. */
async function click(desktop: DesktopBackend, button: MouseButton, count: number, at?: Point) {
  for (let i = 0; i < count; i++) {
    if (i > 0) await sleep(MULTI_CLICK_GAP_MS);
    const where = i === 0 ? at : undefined;
    if (desktop.click) {
      await desktop.click(button, 1, where);
    } else {
      if (where) await desktop.moveCursor(where);
      await desktop.mouseButton(button, "down");
      await desktop.mouseButton(button, "up");
    }
  }
}

function clickCommand<N extends string>(
  name: N,
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
    pointer: true,
    params: z
      .object({ ...pointFields, modifiers: modifiersParam, ...verifyParams })
      .superRefine(wholePoint(false)),
    result: pointerResult,
    handler: (params, ctx) =>
      pointerAction(ctx, params, async (desktop) => {
        const { modifiers } = params;
        if (!modifiers?.length) return click(desktop, button, count, pointOf(params));
        await moveIfGiven(desktop, params);
        await withModifiers(desktop, modifiers, () => click(desktop, button, count));
      }),
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
  pointer: true,
  params: z.object({ ...pointFields, ...verifyParams }).superRefine(wholePoint(true)),
  result: pointerResult,
  handler: (params, ctx) => pointerAction(ctx, params, (desktop) => desktop.moveCursor(pointOf(params)!)),
});

function buttonCommand<N extends string>(name: N, action: "down" | "up", description: string) {
  return defineCommand({
    name,
    description,
    input: true,
    pointer: true,
    params: z.object({ ...pointFields, button: buttonParam, ...verifyParams }).superRefine(wholePoint(false)),
    result: pointerResult,
    handler: (params, ctx) =>
      pointerAction(ctx, params, async (desktop) => {
        await moveIfGiven(desktop, params);
        await desktop.mouseButton(params.button, action);
      }),
  });
}

export const mouseDown = buttonCommand(
  "mouse_down",
  "down",
  "Presses a mouse button (and holds it), at x,y when given.",
);
export const mouseUp = buttonCommand("mouse_up", "up", "Releases a mouse button, at x,y when given.");

/** Motion steps per segment of a drag: the target sees the pointer travel, not jump. */
const DRAG_STEPS = 10;
/** The least pause between two steps: with none, openbox lost the drag's motion 13 times in 25. */
const DRAG_STEP_GAP_MS = 4;

/**
 * Holds `button` along the points, taking `durationS` seconds over it (spread over the steps, at
 * least a few milliseconds between two); an aborted `signal` stops it at the next step (and releases).
 */
async function dragAlong(
  desktop: DesktopBackend,
  points: readonly { x: number; y: number }[],
  button: MouseButton,
  durationS: number,
  signal: AbortSignal,
) {
  const segments = Math.max(1, points.length - 1);
  const stepMs = Math.max(DRAG_STEP_GAP_MS, (durationS * 1000) / (segments * DRAG_STEPS));
  const started = performance.now();
  let steps = 0;
  await desktop.mouseButton(button, "down");
  try {
    let from = points[0];
    for (const to of points.slice(1)) {
      for (let step = 1; step <= DRAG_STEPS; step++) {
        // Paced against the start, so that the time the moves take themselves is not added.
        const due = started + ++steps * stepMs - performance.now();
        if (due > 0) await sleep(due, undefined, { signal });
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

const durationParam = z
  .number()
  .min(0)
  .max(60)
  .default(0.5)
  .describe("Seconds the move takes (cua's default 0.5); the pointer passes through points on the way");

export const dragTo = defineCommand({
  name: "drag_to",
  description: "Presses a button where the pointer is, moves to x,y and releases it.",
  input: true,
  pointer: true,
  params: z.object({
    x: coordinate,
    y: coordinate,
    button: buttonParam,
    duration: durationParam,
    ...verifyParams,
  }),
  result: pointerResult,
  deadlineMs: ({ duration, verify_ms }) => duration * 1000 + 30_000 + verify_ms,
  handler: async (params, ctx) => {
    const { x, y, button, duration } = params;
    const start = await (await ctx.desktop()).cursorPosition();
    return pointerAction(
      ctx,
      params,
      (desktop) => dragAlong(desktop, [start, { x, y }], button, duration, ctx.signal),
      [start],
    );
  },
});

export const drag = defineCommand({
  name: "drag",
  description: "Moves to the first point, presses a button, follows the path and releases at the last point.",
  input: true,
  pointer: true,
  params: z.object({
    path: z
      .array(z.tuple([coordinate, coordinate]))
      .min(1, "Path is empty")
      .max(10_000),
    button: buttonParam,
    duration: durationParam,
    ...verifyParams,
  }),
  result: pointerResult,
  deadlineMs: ({ duration, verify_ms }) => duration * 1000 + 30_000 + verify_ms,
  handler: (params, ctx) => {
    const points = params.path.map(([x, y]) => ({ x, y }));
    return pointerAction(
      ctx,
      params,
      async (desktop) => {
        await desktop.moveCursor(points[0]);
        await dragAlong(desktop, points, params.button, params.duration, ctx.signal);
      },
      [points[0]],
    );
  },
});

const notches = z.number().int().min(-1000).max(1000);

export const scroll = defineCommand({
  name: "scroll",
  description:
    "Turns the wheel where the pointer is, by x (horizontal, positive = right) and y (vertical, positive = up) notches.",
  input: true,
  params: z.object({ x: notches, y: notches, ...verifyParams }),
  result: pointerResult,
  handler: (params, ctx) => pointerAction(ctx, params, (desktop) => desktop.scroll(params.x, params.y)),
});

const clicksParam = z.number().int().min(1).max(1000).default(1);

function scrollByCommand<N extends string>(name: N, sign: 1 | -1, description: string) {
  return defineCommand({
    name,
    description,
    input: true,
    params: z.object({ clicks: clicksParam, ...verifyParams }),
    result: pointerResult,
    handler: (params, ctx) =>
      pointerAction(ctx, params, (desktop) => desktop.scroll(0, sign * params.clicks)),
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
    ...verifyParams,
  }),
  result: pointerResult,
  handler: (params, ctx) => {
    const [dx, dy] = DIRECTIONS[params.direction];
    return pointerAction(ctx, params, (desktop) => desktop.scroll(dx * params.clicks, dy * params.clicks));
  },
});

export const typeText = defineCommand({
  name: "type_text",
  aliases: ["type"],
  description: "Types text exactly, any Unicode (symbols, accents, CJK, emoji) on any keyboard layout.",
  input: true,
  params: z.object({ text: z.string().max(100_000), ...verifyParams }),
  result: keyResult,
  deadlineMs: ({ text, verify_ms }) => 30_000 + text.length * 10 + verify_ms,
  handler: (params, ctx) =>
    keyAction(ctx, params, (desktop) => desktop.typeText(params.text, ctx.signal), params.text),
});

/**
 * A parameter type that normalizes with `normalize` (key names, key syntax), so that handlers get
 * canonical names; what `normalize` refuses is an issue of the parameter, named in the reply.
 */
function normalized<T>(schema: z.ZodType<string | string[]>, normalize: (value: never) => T) {
  return schema.transform((value, ctx) => {
    try {
      return normalize(value as never);
    } catch (err) {
      if (!(err instanceof CommandError)) throw err;
      ctx.addIssue({ code: "custom", message: err.message.replace(/^Invalid params: /, "") });
      return z.NEVER;
    }
  });
}

const keyText = z.string().min(1).max(100);
/** One key, as its canonical name. */
const keyParam = normalized(keyText, (key: string) => normalizeKey(key));

export const pressKey = defineCommand({
  name: "press_key",
  aliases: ["key"],
  description:
    "Presses and releases a key: a name (enter, esc, f5, pagedown, ctrl, win, …), an X keysym name " +
    "(KP_Enter, XF86AudioMute), one character, or in xdotool's syntax a combination (ctrl+shift+t, alt+F4) " +
    "and several separated by spaces, pressed in turn.",
  input: true,
  params: z.object({ key: normalized(z.string().min(1).max(1000), parseKeySequence), ...verifyParams }),
  result: keyResult,
  handler: (params, ctx) =>
    keyAction(ctx, params, async (desktop) => {
      for (const combo of params.key) await pressCombo(desktop, combo);
    }),
});

function keyCommand<N extends string>(name: N, action: "down" | "up", description: string) {
  return defineCommand({
    name,
    description,
    input: true,
    params: z.object({ key: keyParam, ...verifyParams }),
    result: keyResult,
    handler: (params, ctx) => keyAction(ctx, params, (desktop) => desktop.key(params.key, action)),
  });
}

export const keyDown = keyCommand("key_down", "down", "Presses a key and holds it until key_up.");
export const keyUp = keyCommand("key_up", "up", "Releases a key held by key_down.");

/** Holds every key of a combination but the last in order, taps the last, releases the others in reverse. */
async function pressCombo(desktop: DesktopBackend, names: readonly string[]) {
  const last = names[names.length - 1];
  await withModifiers(desktop, names.slice(0, -1), async () => {
    await desktop.key(last, "down");
    await desktop.key(last, "up");
  });
}

export const hotkey = defineCommand({
  name: "hotkey",
  description:
    "Presses a key combination: holds every key but the last in order, taps the last, releases the others " +
    'in reverse (e.g. ["ctrl", "shift", "t"]).',
  input: true,
  params: z.object({
    keys: normalized(z.array(keyText).min(1, "keys is empty").max(16), (keys: string[]) =>
      normalizeCombo(keys),
    ),
    ...verifyParams,
  }),
  result: keyResult,
  handler: (params, ctx) => keyAction(ctx, params, (desktop) => pressCombo(desktop, params.keys)),
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
