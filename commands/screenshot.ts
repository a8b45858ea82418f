/** Screen commands: `screenshot`, `get_screen_size`, `get_cursor_position`, coordinate mapping. */
import { z } from "zod";
import { defineCommand } from "../src/computer/core/command.js";
import { takeScreenshot, toScreenCoordinates, toScreenshotCoordinates } from "../src/desktop/screenshot.js";

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

export const screenshot = defineCommand({
  name: "screenshot",
  description:
    "Captures the screen (or a region) as base64 PNG, JPEG or WebP, optionally scaled down. `scale` in the " +
    "result is image pixels per screen pixel, to map points back to the screen.",
  params: z.object({
    format: formatParam,
    quality: z.number().int().min(1).max(100).default(95).describe("JPEG/WebP quality, 1–100"),
    region: regionParam.nullish(),
    max_width: z.number().int().positive().nullish().describe("Scale down to fit this width"),
    max_height: z.number().int().positive().nullish().describe("Scale down to fit this height"),
    scale: z.number().positive().max(1).nullish().describe("Image pixels per screen pixel, (0, 1]"),
  }),
  result: z.object({
    image_data: z.string(),
    format: z.enum(["png", "jpeg", "webp"]),
    width: z.number(),
    height: z.number(),
    scale: z.number(),
  }),
  handler: async (params, ctx) => {
    const desktop = await ctx.desktop();
    const shot = await takeScreenshot(desktop, {
      format: params.format,
      quality: params.quality,
      region: params.region ?? undefined,
      maxWidth: params.max_width ?? undefined,
      maxHeight: params.max_height ?? undefined,
      scale: params.scale ?? undefined,
    });
    return {
      image_data: shot.base64,
      format: shot.format,
      width: shot.width,
      height: shot.height,
      scale: shot.scale,
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

const mappingParams = z.object({
  x: z.number(),
  y: z.number(),
  scale: z
    .number()
    .positive()
    .nullish()
    .describe("Image pixels per screen pixel; default: the last screenshot's"),
});
const coordinatesResult = z.object({ coordinates: z.tuple([z.number(), z.number()]) });

export const toScreenCoordinatesCommand = defineCommand({
  name: "to_screen_coordinates",
  description: "Maps a point of the last screenshot (its pixels) to screen pixels.",
  params: mappingParams,
  result: coordinatesResult,
  handler: ({ x, y, scale }) => {
    const point = toScreenCoordinates({ x, y }, scale ?? undefined);
    return { coordinates: [point.x, point.y] as [number, number] };
  },
});

export const toScreenshotCoordinatesCommand = defineCommand({
  name: "to_screenshot_coordinates",
  description: "Maps a point in screen pixels to the pixels of the last screenshot.",
  params: mappingParams,
  result: coordinatesResult,
  handler: ({ x, y, scale }) => {
    const point = toScreenshotCoordinates({ x, y }, scale ?? undefined);
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
