/**
 * Screenshots from any backend: capture, optional downscale, encode with sharp (libvips, no
 * per-pixel JavaScript). An unchanged screen costs no encoding: the encoded bytes are kept per raw
 * capture and options, and a capture is recognised as unchanged either because the backend hands
 * out the same `RawImage` again (X11 with DAMAGE) or because its bytes equal the previous one.
 * A screen where little changed costs little: full-size JPEGs and all PNGs are encoded in strips,
 * and only the strips whose pixels changed since the last one are encoded again (jpeg-strips.ts,
 * png-strips.ts). The fourth byte of a capture is dropped by the backend where it can
 * (`RawImage.rgb`, WebAssembly), not by a libvips pipeline.
 */
import { availableParallelism } from "node:os";
import type { Sharp, SharpOptions } from "sharp";
import { CommandError } from "../common/errors.js";
import { IDLE_RELEASE_MS, idleTimer } from "../common/idle.js";
import { settled } from "../common/settled.js";
import type { DesktopBackend, Point, RawImage, Rect, Rows, Size } from "./backend.js";
import {
  changedStrips,
  encodeInParts,
  encodeInStrips,
  STRIP_ROWS,
  type StripCache,
  type StripEncoder,
} from "./jpeg-strips.js";
import { encodePngInStrips, type PngStripCache } from "./png-strips.js";
import { type BandSource, type ResizeCache, resizeInBands } from "./resize-bands.js";

export type ImageFormat = "png" | "jpeg" | "webp";

export interface ScreenshotOptions {
  format: ImageFormat;
  /** 1–100, for JPEG and WebP. */
  quality: number;
  region?: Rect;
  /** Fit the image within these bounds (never enlarges). */
  maxWidth?: number;
  maxHeight?: number;
  /** Image pixels per screen pixel, (0, 1]; ignored when `maxWidth`/`maxHeight` are given. */
  scale?: number;
  /** Exactly this output size (stretching if the aspect differs); overrides the other size options. */
  size?: Size;
  /** Draw the mouse pointer at this screen point (captures hold no pointer). */
  cursor?: Point;
}

export interface Screenshot {
  data: Buffer;
  format: ImageFormat;
  width: number;
  height: number;
  /** Image pixels per screen pixel. */
  scale: number;
  /** Where the image's top-left corner is on the screen. */
  origin: Point;
}

/**
 * PNG settings chosen for speed on full-HD screens: zlib level 2 without adaptive filtering, for
 * larger files (bench/desktop.ts measures the choices; docs/desktop.md has the figures). The PNGs in
 * strips (png-strips.ts) use the same level and filter, with Node's zlib.
 */
export const PNG_OPTIONS = { compressionLevel: 2, adaptiveFiltering: false } as const;

/** JPEG without the second (Huffman-optimising) pass: faster, files a little larger (docs/desktop.md). */
export const JPEG_OPTIONS = { optimiseCoding: false, chromaSubsampling: "4:2:0" } as const;

// On glibc Linux sharp gives libvips a single thread by default (to limit memory fragmentation);
// JPEG encoding and resizing are about twice as fast with two.
// libvips' operation cache is off: every input is a new capture, and a capture's memory is reused.
// sharp (libvips) is loaded at the first screenshot, not at start-up: it is a third of the idle memory.
let loadedSharp: Promise<(input: Buffer, options: SharpOptions) => Sharp> | undefined;
function loadSharp() {
  loadedSharp ??= import("sharp").then(({ default: sharp }) => {
    sharp.concurrency(Math.max(sharp.concurrency(), Math.min(4, availableParallelism())));
    sharp.cache(false);
    return sharp;
  });
  return loadedSharp;
}

interface CacheEntry {
  raw: RawImage;
  encoded: Map<string, Promise<Screenshot>>;
}

const MAX_CACHED_VARIANTS = 8;
let cached: CacheEntry | null = null;
let queue: Promise<unknown> = Promise.resolve();
/** The capture and its encodings are let go after a few idle seconds (a 1080p capture is 8 MB). */
const idle = idleTimer(IDLE_RELEASE_MS, () => {
  cached = null;
  jpegStrips = null;
  wholeJpeg = null;
  pngStrips = null;
  pngFrom = null;
  resized = null;
});

/**
 * One screenshot at a time, capture and encoding: a backend may reuse a capture's memory two
 * captures later (see `RawImage`), and two encodings at once would only share the same cores.
 */
export function takeScreenshot(backend: DesktopBackend, options: ScreenshotOptions): Promise<Screenshot> {
  return inTurn(() => captureAndEncode(backend, options));
}

/**
 * A capture for another reader (the live view), taken and used in the same turn as the agents'
 * screenshots: neither can have its capture's memory reused under it while it encodes.
 */
export function withCapture<T>(backend: DesktopBackend, use: (raw: RawImage) => Promise<T>): Promise<T> {
  return inTurn(async () => use(await backend.capture()));
}

function inTurn<T>(work: () => Promise<T>): Promise<T> {
  const run = queue.then(work);
  queue = settled(run);
  idle.touch();
  return run;
}

async function captureAndEncode(backend: DesktopBackend, options: ScreenshotOptions): Promise<Screenshot> {
  const raw = await backend.capture(options.region);
  const origin = options.region
    ? { x: Math.max(0, Math.floor(options.region.x)), y: Math.max(0, Math.floor(options.region.y)) }
    : { x: 0, y: 0 };
  // Strips are compared with the last encoding's anyway (jpeg-strips.ts, png-strips.ts): a second
  // comparison of the whole frame here would only cost another pass over it.
  const entry = cacheEntryFor(raw, !jpegStripped(raw, options) && !pngStripped(raw, options));
  const key = JSON.stringify([
    options.format,
    options.quality,
    options.maxWidth,
    options.maxHeight,
    options.scale,
    options.size?.width,
    options.size?.height,
    origin,
    options.cursor?.x,
    options.cursor?.y,
  ]);
  let pending = entry.encoded.get(key);
  if (!pending) {
    if (entry.encoded.size >= MAX_CACHED_VARIANTS) entry.encoded.clear();
    pending = encode(raw, options, origin);
    entry.encoded.set(key, pending);
    pending.catch(() => entry.encoded.delete(key));
  }
  const shot = await pending;
  return shot;
}

/** How a screenshot's pixels map to the screen: where its top-left corner is, and its scale. */
export interface ScreenshotMapping {
  origin: Point;
  /** Image pixels per screen pixel (horizontally and vertically). */
  scale: { x: number; y: number };
}

/** The screen pixel of a point given in a screenshot's pixels. */
export function toScreenCoordinates(point: Point, mapping: ScreenshotMapping): Point {
  return {
    x: Math.round(point.x / mapping.scale.x + mapping.origin.x),
    y: Math.round(point.y / mapping.scale.y + mapping.origin.y),
  };
}

/** A screenshot's pixel of a point given in screen pixels. */
export function toScreenshotCoordinates(point: Point, mapping: ScreenshotMapping): Point {
  return {
    x: Math.round((point.x - mapping.origin.x) * mapping.scale.x),
    y: Math.round((point.y - mapping.origin.y) * mapping.scale.y),
  };
}

function cacheEntryFor(raw: RawImage, compare: boolean): CacheEntry {
  if (cached && (cached.raw === raw || (compare && sameImage(cached.raw, raw)))) return cached;
  cached = { raw, encoded: new Map() };
  return cached;
}

function sameImage(a: RawImage, b: RawImage): boolean {
  return a.width === b.width && a.height === b.height && a.channels === b.channels && a.data.equals(b.data);
}

/**
 * The output size: exactly `size` when given, else fit within max_width/max_height, else `scale`;
 * never larger than the capture unless `size` says so.
 */
export function targetSize(width: number, height: number, options: ScreenshotOptions) {
  if (options.size) return { ...options.size, scale: options.size.width / width };
  let scale = 1;
  if (options.maxWidth !== undefined || options.maxHeight !== undefined) {
    scale = Math.min(1, (options.maxWidth ?? width) / width, (options.maxHeight ?? height) / height);
  } else if (options.scale !== undefined) {
    scale = Math.min(1, options.scale);
  }
  const outWidth = Math.max(1, Math.round(width * scale));
  const outHeight = Math.max(1, Math.round(height * scale));
  return { width: outWidth, height: outHeight, scale: outWidth / width };
}

/** Whether a screenshot is a JPEG of the whole capture without a pointer: encoded in strips. */
function jpegStripped(raw: RawImage, options: ScreenshotOptions): boolean {
  const size = targetSize(raw.width, raw.height, options);
  return (
    options.format === "jpeg" && !options.cursor && size.width === raw.width && size.height === raw.height
  );
}

/** Whether a screenshot is a PNG without a pointer from a capture that has R,G,B: encoded in strips. */
function pngStripped(raw: RawImage, options: ScreenshotOptions): boolean {
  return options.format === "png" && !options.cursor && (raw.channels === 3 || raw.rgb !== undefined);
}

async function encode(raw: RawImage, options: ScreenshotOptions, origin: Point): Promise<Screenshot> {
  const size = targetSize(raw.width, raw.height, options);
  try {
    const cursor = options.cursor && (await pointerOverlay(options.cursor, origin, size, raw));
    const data =
      (jpegStripped(raw, options) && (await jpegInStrips(raw, options.quality))) ||
      (pngStripped(raw, options) && (await pngInStrips(raw, size))) ||
      (await (await pipelineFor(raw, size, options.format, options.quality, cursor || undefined)).toBuffer());
    return {
      data,
      format: options.format,
      width: size.width,
      height: size.height,
      scale: size.scale,
      origin,
    };
  } catch (err) {
    throw new CommandError("failed", `Screenshot encoding failed: ${(err as Error).message}`);
  }
}

/** The strips of the last JPEG at full size (see jpeg-strips.ts); let go with the capture when idle. */
let jpegStrips: StripCache | null = null;

/**
 * The share of a frame's strips that, changed, make a JPEG cheaper encoded whole (a sharp call per
 * core, about half the CPU of its strips one by one: each costs a call's set-up). Its strips are then
 * not kept.
 */
const WHOLE_JPEG_SHARE = 0.75;

/** A frame encoded whole is encoded in this many parts at once, one per core (jpeg-strips.ts). */
const WHOLE_JPEG_PARTS = Math.min(4, availableParallelism());

/**
 * The last full-size JPEG encoded whole (and its variant): while the frames keep changing nearly
 * everywhere they are encoded whole, with no strips kept.
 */
let wholeJpeg: { image: RawImage; variant: string } | null = null;

/**
 * A full-size JPEG of which only the strips that changed since the last one are encoded. A frame
 * that changed nearly everywhere since the last (a page loaded) is encoded whole, and the strips are
 * made again at the next frame that changed less, as for a first one.
 */
async function jpegInStrips(raw: RawImage, quality: number): Promise<Buffer | null> {
  const sharp = await loadSharp();
  const variant = `q${quality}`;
  const previous = jpegStrips;
  const lastWhole = wholeJpeg;
  jpegStrips = null;
  wholeJpeg = null;
  const strips = Math.ceil(raw.height / STRIP_ROWS);
  const most = strips * WHOLE_JPEG_SHARE;
  const changedRows = lastWhole?.variant === variant ? raw.changedSince?.(lastWhole.image) : undefined;
  const whole = previous
    ? changedStrips(raw, variant, previous) >= most
    : changedRows !== undefined && changedRows.height >= raw.height * WHOLE_JPEG_SHARE;
  const encodeStrip: StripEncoder = (rows, height, top) => {
    // The R,G,B form of the strip's rows only: most strips are usually unchanged.
    const rgb = rgbPixels(raw, top, height);
    const { width } = raw;
    const strip = rgb
      ? sharp(rgb.subarray(top * width * 3, (top + height) * width * 3), {
          raw: { width, height, channels: 3 },
        })
      : withoutAlpha(sharp(rows, { raw: { width, height, channels: raw.channels } }), raw.channels);
    return strip.jpeg({ ...JPEG_OPTIONS, quality }).toBuffer();
  };
  if (strips > 1 && whole) {
    const size = { width: raw.width, height: raw.height };
    const data =
      (WHOLE_JPEG_PARTS > 1 && (await encodeInParts(raw, WHOLE_JPEG_PARTS, encodeStrip))) ||
      (await (await pipelineFor(raw, size, "jpeg", quality)).toBuffer());
    wholeJpeg = { image: raw, variant };
    return data;
  }
  const encoded = await encodeInStrips(raw, variant, encodeStrip, previous);
  jpegStrips = encoded?.cache ?? null;
  return encoded?.data ?? null;
}

/**
 * A capture's pixels as packed R,G,B (at least rows `top` to `top + rows`) when it has them that way
 * or the backend makes them; else null.
 */
function rgbPixels(raw: RawImage, top?: number, rows?: number): Buffer | null {
  if (raw.channels === 3) return raw.data;
  return raw.rgb?.(top, rows) ?? null;
}

/** A raw input's fourth byte dropped (encoders take 3 channels: screens are opaque). */
function withoutAlpha(pipeline: Sharp, channels: 3 | 4): Sharp {
  return channels === 4 ? pipeline.removeAlpha() : pipeline;
}

/** The strips of the last PNG (see png-strips.ts); let go with the capture when idle. */
let pngStrips: PngStripCache | null = null;
/** The capture the last PNG's strips were made from, and whether through the banded downscale. */
let pngFrom: { image: RawImage; resized: boolean } | null = null;
/** The last downscale for a PNG, to redo only its changed bands (see resize-bands.ts). */
let resized: ResizeCache | null = null;

/**
 * A PNG of which only the strips that changed since the last one are deflated, from the capture's
 * R,G,B (resized first when asked, only where the capture changed); null when the backend gives no
 * R,G,B or the strips cannot be joined.
 */
async function pngInStrips(raw: RawImage, size: Size): Promise<Buffer | null> {
  const { width, height } = raw;
  const before = pngFrom;
  pngFrom = null;
  let pixels: Buffer;
  /** The rows of `pixels` that may differ from the last PNG's, when known. */
  let changed: Rows | undefined;
  const resizing = size.width !== width || size.height !== height;
  if (resizing) {
    const previous = resized;
    resized = null;
    // The bands are compared on the capture's own pixels; only those resized are made R,G,B.
    const rgbRows = raw.channels === 3 ? () => raw.data : raw.rgb?.bind(raw);
    if (!rgbRows) return null;
    const source: BandSource = { width, height, pixels: raw.data, rgb: rgbRows, image: raw };
    const done = await resizeInBands(await loadSharp(), source, size, previous);
    resized = done.cache;
    pixels = done.output;
    // The downscale kept every output row it did not redo: those are the last PNG's when it was made
    // from that same downscale.
    if (before?.resized && previous?.image === before.image) changed = done.redone;
  } else {
    const rgb = rgbPixels(raw);
    if (!rgb) return null;
    pixels = rgb;
    if (before && !before.resized) changed = raw.changedSince?.(before.image);
  }
  const previous = pngStrips;
  pngStrips = null;
  const encoded = await encodePngInStrips(
    pixels,
    size.width,
    size.height,
    PNG_OPTIONS.compressionLevel,
    previous,
    changed,
  );
  pngStrips = encoded?.cache ?? null;
  if (encoded) pngFrom = { image: raw, resized: resizing };
  return encoded?.data ?? null;
}

/** An image laid over a screenshot: its PNG bytes and where its top-left corner goes. */
interface Overlay {
  input: Buffer;
  left: number;
  top: number;
}

/** The pointer's arrow at scale 1: black with a white edge, its tip at (1, 1). */
const ARROW = "M1 1 L1 17 L5 13 L8 20 L11 19 L8 12 L13 12 Z";
const ARROW_SIZE = { width: 14, height: 21 };

/**
 * The pointer drawn where `at` (screen pixels) is in an image of `size` taken from `origin` of a
 * capture of `raw`'s size, no smaller than at scale 1 and cut at the image's edges; null when the
 * pointer is outside the image.
 */
async function pointerOverlay(at: Point, origin: Point, size: Size, raw: RawImage): Promise<Overlay | null> {
  const sx = size.width / raw.width;
  const sy = size.height / raw.height;
  const left = Math.floor((at.x - origin.x) * sx);
  const top = Math.floor((at.y - origin.y) * sy);
  if (left < 0 || top < 0 || left >= size.width || top >= size.height) return null;
  const zoom = Math.max(1, Math.min(sx, sy));
  const width = Math.min(Math.ceil(ARROW_SIZE.width * zoom), size.width - left);
  const height = Math.min(Math.ceil(ARROW_SIZE.height * zoom), size.height - top);
  const svg =
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}">` +
    `<path d="${ARROW}" transform="scale(${zoom})" fill="black" stroke="white" stroke-width="1.2" ` +
    `stroke-linejoin="round"/></svg>`;
  const sharp = await loadSharp();
  return { input: await sharp(Buffer.from(svg), {}).png().toBuffer(), left, top };
}

/** The sharp pipeline from a capture to an image of `size` in `format`, with `overlay` drawn on it. */
/**
 * A capture encoded whole at `size`, with nothing cached (for another reader: the live view), as
 * screenshots without strips are.
 */
export async function encodeCapture(raw: RawImage, size: Size, format: ImageFormat, quality: number) {
  return (await pipelineFor(raw, size, format, quality)).toBuffer();
}

async function pipelineFor(
  raw: RawImage,
  size: Size,
  format: ImageFormat,
  quality: number,
  overlay?: Overlay,
): Promise<Sharp> {
  const sharp = await loadSharp();
  const { width, height } = raw;
  const rgb = rgbPixels(raw);
  let pipeline = rgb
    ? sharp(rgb, { raw: { width, height, channels: 3 } })
    : withoutAlpha(sharp(raw.data, { raw: { width, height, channels: raw.channels } }), raw.channels);
  if (size.width !== width || size.height !== height) {
    // libvips treats a fourth channel as alpha and resizes premultiplied, in floating point, and
    // `removeAlpha()` only applies after the resize: the fourth byte (meaningless, see `RawImage`) is
    // dropped first, by the backend (`RawImage.rgb`) or else in a pipeline of its own, which costs
    // less (18 against 26-31 ms for 1920x1080 to 1280x800 under load).
    if (!rgb && raw.channels === 4) {
      const dropped = await pipeline.raw().toBuffer();
      pipeline = sharp(dropped, { raw: { width, height, channels: 3 } });
    }
    pipeline = pipeline.resize(size.width, size.height, { fit: "fill", kernel: "linear" });
  }
  if (overlay) {
    // Composited after the resize, at the resized image's scale.
    pipeline = sharp(await pipeline.raw().toBuffer(), { raw: { ...size, channels: 3 } }).composite([overlay]);
  }
  switch (format) {
    case "png":
      return pipeline.png(PNG_OPTIONS);
    case "jpeg":
      return pipeline.jpeg({ ...JPEG_OPTIONS, quality });
    case "webp":
      return pipeline.webp({ quality, effort: 0 });
  }
}
