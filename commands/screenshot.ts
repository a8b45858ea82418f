/** Screen commands: `screenshot`, `get_screen_size`, `get_cursor_position`, coordinate mapping. */
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import { Bytes, bytesField } from "../src/computer/core/bytes.js";
import { type CommandContext, defineCommand } from "../src/computer/core/command.js";
import type { DesktopBackend } from "../src/desktop/backend.js";
import {
  type Screenshot,
  type ScreenshotMapping,
  type ScreenshotOptions,
  takeScreenshot,
  targetSize,
  toScreenCoordinates,
  toScreenshotCoordinates,
} from "../src/desktop/screenshot.js";

/**
 * How recent screenshots map to the screen, for the coordinate commands: by the id each screenshot
 * returns (the last KEPT_MAPPINGS of them), and the last one per client connection. Nothing is
 * shared between clients: one agent's screenshot never changes another's mapping.
 */
const KEPT_MAPPINGS = 256;
const mappingsById = new Map<string, ScreenshotMapping>();
const lastByConnection = new WeakMap<object, ScreenshotMapping>();

function remember(mapping: ScreenshotMapping, ctx: CommandContext): string {
  const id = randomBytes(6).toString("hex");
  mappingsById.set(id, mapping);
  if (mappingsById.size > KEPT_MAPPINGS) mappingsById.delete(mappingsById.keys().next().value as string);
  if (ctx.connection) lastByConnection.set(ctx.connection, mapping);
  return id;
}

const formatParam = z
  .preprocess(
    (value) => (typeof value === "string" ? value.trim().toLowerCase().replace(/^jpg$/, "jpeg") : value),
    z.enum(["png", "jpeg", "webp"]),
  )
  .default("png")
  .describe("png (default, lossless), jpeg or webp; jpg means jpeg");

const regionParam = z
  .object({
    x: z.number().int().min(0),
    y: z.number().int().min(0),
    width: z.number().int().positive(),
    height: z.number().int().positive(),
  })
  .describe("Only this part of the screen, in screen pixels");

/**
 * What model hosts accept of an image: Anthropic's API scales down anything longer than 1568 px on
 * its long edge, and hosts refuse images over about 1 MB (Claude Desktop, several MCP clients).
 */
const MODEL_LONG_EDGE = 1568;
const MODEL_BYTES = 1_000_000;
/** JPEG qualities tried, best first, when an image is over MODEL_BYTES; then it is made smaller. */
const MODEL_QUALITIES = [85, 70, 55, 40];
const MODEL_SHRINK = 0.7;

/**
 * A screenshot within what model hosts accept: at most MODEL_LONG_EDGE on its long edge, and at most
 * MODEL_BYTES (as JPEG of falling quality when the format asked for is larger, then smaller).
 */
async function screenshotForModels(desktop: DesktopBackend, options: ScreenshotOptions): Promise<Screenshot> {
  const area = options.region ?? (await desktop.screenSize());
  const wanted = targetSize(area.width, area.height, options);
  const fit = Math.min(1, MODEL_LONG_EDGE / Math.max(wanted.width, wanted.height));
  let bounds = {
    maxWidth: Math.max(1, Math.floor(wanted.width * fit)),
    maxHeight: Math.max(1, Math.floor(wanted.height * fit)),
  };
  let shot = await takeScreenshot(desktop, { ...options, ...bounds });
  for (let shrink = 0; shot.data.length > MODEL_BYTES && shrink < 6; shrink++) {
    for (const quality of MODEL_QUALITIES) {
      if (options.format === "jpeg" && quality >= options.quality) continue;
      shot = await takeScreenshot(desktop, { ...options, ...bounds, format: "jpeg", quality });
      if (shot.data.length <= MODEL_BYTES) return shot;
    }
    bounds = {
      maxWidth: Math.max(1, Math.floor(bounds.maxWidth * MODEL_SHRINK)),
      maxHeight: Math.max(1, Math.floor(bounds.maxHeight * MODEL_SHRINK)),
    };
  }
  return shot;
}

export const screenshot = defineCommand({
  name: "screenshot",
  description:
    "Captures the screen (or a region) as base64 PNG, JPEG or WebP, optionally scaled down. `scale` in the " +
    "result is image pixels per screen pixel, to map points back to the screen.",
  capture: true,
  modelDefaults: { fit: "model" },
  params: z.object({
    format: formatParam,
    quality: z.number().int().min(1).max(100).default(95).describe("JPEG/WebP quality, 1–100"),
    region: regionParam.nullish(),
    max_width: z.number().int().positive().nullish().describe("Scale down to fit this width"),
    max_height: z.number().int().positive().nullish().describe("Scale down to fit this height"),
    scale: z.number().positive().max(1).nullish().describe("Image pixels per screen pixel, (0, 1]"),
    cursor: z
      .boolean()
      .default(false)
      .describe("Draw the mouse pointer into the image (captures hold none), for models that need to see it"),
    fit: z
      .enum(["full", "model"])
      .default("full")
      .describe(
        `model: at most ${MODEL_LONG_EDGE} px on the long edge and ${MODEL_BYTES / 1_000_000} MB (JPEG when ` +
          "the format asked for would be larger), what model hosts accept; full: as asked. MCP's default is model",
      ),
  }),
  result: z.object({
    image_data: bytesField("the image, base64", { mimeType: "image/*" }),
    format: z.enum(["png", "jpeg", "webp"]),
    width: z.number(),
    height: z.number(),
    scale: z.number(),
    screenshot_id: z.string().describe("pass it to to_screen_coordinates to map this image's points"),
  }),
  handler: async (params, ctx) => {
    const desktop = await ctx.desktop();
    const options: ScreenshotOptions = {
      format: params.format,
      quality: params.quality,
      region: params.region ?? undefined,
      maxWidth: params.max_width ?? undefined,
      maxHeight: params.max_height ?? undefined,
      scale: params.scale ?? undefined,
      cursor: params.cursor ? await desktop.cursorPosition() : undefined,
    };
    const shot =
      params.fit === "model"
        ? await screenshotForModels(desktop, options)
        : await takeScreenshot(desktop, options);
    return {
      image_data: new Bytes(shot.data, `image/${shot.format}`),
      format: shot.format,
      width: shot.width,
      height: shot.height,
      scale: shot.scale,
      screenshot_id: remember({ origin: shot.origin, scale: { x: shot.scale, y: shot.scale } }, ctx),
    };
  },
});

export const getScreenSize = defineCommand({
  name: "get_screen_size",
  description: "The size of the screen in pixels (the unit of every coordinate).",
  params: z.object({}),
  result: z.object({ size: z.object({ width: z.number(), height: z.number() }) }),
  handler: async (_params, ctx) => ({ size: await (await ctx.desktop()).screenSize() }),
});

export const getCursorPosition = defineCommand({
  name: "get_cursor_position",
  description: "Where the mouse pointer is, in screen pixels.",
  params: z.object({}),
  result: z.object({ position: z.object({ x: z.number(), y: z.number() }) }),
  handler: async (_params, ctx) => ({ position: await (await ctx.desktop()).cursorPosition() }),
});

const mappingParams = z
  .object({
    x: z.number(),
    y: z.number(),
    screenshot_id: z.string().max(64).optional().describe("the id a screenshot returned"),
    screenshot_width: z
      .number()
      .positive()
      .optional()
      .describe("with screenshot_height: a full-screen image's size"),
    screenshot_height: z.number().positive().optional(),
    scale: z.number().positive().nullish().describe("image pixels per screen pixel, for a full-screen image"),
  })
  .refine((p) => (p.screenshot_width === undefined) === (p.screenshot_height === undefined), {
    message: "screenshot_width and screenshot_height go together",
    path: ["screenshot_height"],
  })
  .refine(
    (p) =>
      [p.screenshot_id, p.screenshot_width, p.scale ?? undefined].filter((v) => v !== undefined).length <= 1,
    { message: "give one of screenshot_id, screenshot_width/height or scale", path: ["screenshot_id"] },
  );
const coordinatesResult = z.object({ coordinates: z.tuple([z.number(), z.number()]) });

/**
 * The mapping a request names: a screenshot's id, a full-screen image's size or scale, or else the
 * last screenshot this client's connection took (and without one, the screen itself).
 */
async function mappingFor(
  p: z.output<typeof mappingParams>,
  ctx: CommandContext,
): Promise<ScreenshotMapping> {
  const origin = { x: 0, y: 0 };
  if (p.screenshot_id !== undefined) {
    const known = mappingsById.get(p.screenshot_id);
    if (!known) {
      throw new CommandError(
        "not_found",
        `Unknown screenshot_id: ${p.screenshot_id} (the last ${KEPT_MAPPINGS} screenshots are remembered)`,
      );
    }
    return known;
  }
  if (p.screenshot_width !== undefined && p.screenshot_height !== undefined) {
    const screen = await (await ctx.desktop()).screenSize();
    return {
      origin,
      scale: { x: p.screenshot_width / screen.width, y: p.screenshot_height / screen.height },
    };
  }
  if (p.scale) return { origin, scale: { x: p.scale, y: p.scale } };
  return (ctx.connection && lastByConnection.get(ctx.connection)) ?? { origin, scale: { x: 1, y: 1 } };
}

export const toScreenCoordinatesCommand = defineCommand({
  name: "to_screen_coordinates",
  description:
    "Maps a point of a screenshot (its pixels) to screen pixels: the screenshot named by screenshot_id, or " +
    "a full-screen image of screenshot_width x screenshot_height, or of `scale`; else this connection's " +
    "last screenshot.",
  params: mappingParams,
  result: coordinatesResult,
  handler: async (p, ctx) => {
    const point = toScreenCoordinates({ x: p.x, y: p.y }, await mappingFor(p, ctx));
    return { coordinates: [point.x, point.y] as [number, number] };
  },
});

export const toScreenshotCoordinatesCommand = defineCommand({
  name: "to_screenshot_coordinates",
  description: "Maps a point in screen pixels to a screenshot's pixels (named as for to_screen_coordinates).",
  params: mappingParams,
  result: coordinatesResult,
  handler: async (p, ctx) => {
    const point = toScreenshotCoordinates({ x: p.x, y: p.y }, await mappingFor(p, ctx));
    return { coordinates: [point.x, point.y] as [number, number] };
  },
});

export default [
  screenshot,
  getScreenSize,
  getCursorPosition,
  toScreenCoordinatesCommand,
  toScreenshotCoordinatesCommand,
];
