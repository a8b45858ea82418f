/**
 * The messages between the nut-js backend (in the server) and its worker process (which loads
 * nut-js). Only plain data crosses: numbers for nut's `Key` values, Buffers for pixels.
 */
import type { MouseButton, Point, Rect, Size } from "../backend.js";

/** One key event: a nut-js `Key` value and whether it goes down or up. */
export type KeyStroke = readonly [key: number, action: "down" | "up"];

/** A window as nut-js sees it. `handle` is the native window handle. */
export interface NutWindow {
  handle: number;
  title: string;
  bounds: Rect;
}

/** Each operation the worker performs: its arguments and what it answers. */
export interface WorkerOps {
  screenSize: [Record<string, never>, Size];
  /**
   * Pixels in RGBA order, the alpha byte set to 255, and an id for this frame. When the caller
   * already holds frame `known` and the pixels have not changed, `data` is null (no 8 MB copy).
   */
  capture: [
    { region?: Rect; known?: string },
    { id: string; width: number; height: number; data: Uint8Array | null },
  ];
  cursorPosition: [Record<string, never>, Point];
  moveCursor: [Point, null];
  mouseButton: [{ button: Exclude<MouseButton, "back" | "forward">; action: "down" | "up" }, null];
  /** Notches; positive `dx` right, positive `dy` up. */
  scroll: [{ dx: number; dy: number }, null];
  keys: [{ strokes: readonly KeyStroke[] }, null];
  readClipboard: [Record<string, never>, string];
  writeClipboard: [{ text: string }, null];
  listWindows: [Record<string, never>, NutWindow[]];
  activeWindow: [Record<string, never>, NutWindow | null];
  describeWindow: [{ handle: number }, NutWindow];
  focusWindow: [{ handle: number }, null];
  moveWindow: [{ handle: number; x: number; y: number }, null];
  resizeWindow: [{ handle: number; width: number; height: number }, null];
}

export type OpName = keyof WorkerOps;

export interface WorkerRequest<K extends OpName = OpName> {
  id: number;
  op: K;
  args: WorkerOps[K][0];
}

export type WorkerReply =
  | { id: number; ok: true; value: unknown }
  | { id: number; ok: false; error: { message: string } }
  /** Sent once, after nut-js loaded and opened the display. */
  | { ready: true; platform: NodeJS.Platform };
