/**
 * The model's display and the screen: the size a model is given (`auto` per vocabulary) and the
 * mapping of points between the two, each axis on its own (a display of another aspect is stretched).
 */
import { z } from "zod";
import type { Point, Rect, Size } from "../../src/desktop/backend.js";

export type Vocabulary = "anthropic" | "openai" | "toolset" | "gemini";

export const sizeSchema = z.object({
  width: z.number().int().min(1).max(16_384),
  height: z.number().int().min(1).max(16_384),
});

/**
 * `auto` display sizes: Anthropic's tools work best at most about a megapixel (1280x800, its WXGA
 * recommendation) with the long edge within 1568; OpenAI resizes images so the short side is 768;
 * Gemini's computer use recommends 1440x900. Never larger than the screen.
 */
export function autoDisplay(screen: Size, vocabulary: Vocabulary): Size {
  const { width, height } = screen;
  let scale: number;
  if (vocabulary === "openai") {
    scale = Math.min(1, 768 / Math.min(width, height), 2048 / Math.max(width, height));
  } else if (vocabulary === "gemini") {
    scale = Math.min(1, 1440 / width, 900 / height);
  } else {
    scale = Math.min(1, Math.sqrt((1280 * 800) / (width * height)), 1568 / Math.max(width, height));
  }
  return { width: Math.round(width * scale), height: Math.round(height * scale) };
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

/** Gemini's grid: 0 to 999 on each axis, whatever the screen's size. */
export const GRID = 1000;

/** The screen pixel of a point of Gemini's 0–999 grid: `floor(v × size / 1000)` on each axis. */
export function gridToScreen(point: Point, screen: Size): Point {
  return {
    x: Math.floor((point.x * screen.width) / GRID),
    y: Math.floor((point.y * screen.height) / GRID),
  };
}
