/**
 * The one narrow interface every desktop backend implements (X11, nut-js). Command handlers talk
 * to this and never know which backend is behind it. Coordinates are screen pixels, origin top-left.
 */
import { CommandError } from "../common/errors.js";

export interface Point {
  x: number;
  y: number;
}
export interface Size {
  width: number;
  height: number;
}
export interface Rect extends Point, Size {}

/**
 * Raw pixels as captured: `channels` bytes per pixel, RGB when 3, RGBA order when 4. Screens are
 * opaque, so the fourth byte carries no meaning (it may be padding): encoders drop it. Treat `data`
 * as read-only: a backend may hand out the same object again while the screen has not changed, and
 * may reuse its memory for the capture after the next one (so use an image before capturing twice more).
 */
export interface RawImage {
  width: number;
  height: number;
  channels: 3 | 4;
  data: Buffer;
  /**
   * Optional, for 4 channels: the same pixels as packed R,G,B (the fourth byte dropped), valid as
   * long as `data` is. Encoders use it instead of dropping the byte themselves. With `top` and
   * `rows`, only those rows need be made (the buffer is still the whole image's): each row is made
   * once, at the first call that asks for it.
   */
  rgb?(top?: number, rows?: number): Buffer;
  /**
   * Optional: the rows (from the image's top) outside of which this image's pixels are exactly those
   * of `earlier`, an earlier capture by the same backend (its memory may be reused since: it is only
   * named, not read); undefined when the backend cannot tell (another region, too long ago). Encoders
   * compare only these rows with what they kept (X11: from DAMAGE and the rows the captures read).
   */
  changedSince?(earlier: RawImage): Rows | undefined;
}

/** A run of an image's rows: `height` rows from row `top` (none when `height` is 0). */
export interface Rows {
  top: number;
  height: number;
}

/** `back` and `forward` are the side buttons (X buttons 8 and 9). */
export type MouseButton = "left" | "right" | "middle" | "back" | "forward";

export interface WindowInfo {
  id: string;
  title: string;
  pid: number | null;
  appName: string | null;
  bounds: Rect;
  active: boolean;
  minimized: boolean;
}

/**
 * Where the screen changed since a watch began, as the backend learns of it (X DAMAGE): what tells
 * whether an action had an effect. Made before the action, so that its changes are all seen.
 */
export interface ChangeWatch {
  /** The boxes that changed so far, in screen pixels (a few at most: later ones are merged). */
  readonly changes: readonly Rect[];
  /**
   * Resolves true as soon as `enough(changes)` holds (at once if it already does), false after
   * `timeoutMs` or when `signal` aborts.
   */
  until(
    enough: (changes: readonly Rect[]) => boolean,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<boolean>;
  /** Stops watching; later changes are not recorded. */
  stop(): void;
}

export interface DesktopBackend {
  readonly name: string;

  // capture
  screenSize(): Promise<Size>;
  capture(region?: Rect): Promise<RawImage>;
  /**
   * Optional: resolves true once the screen may have changed since `since` (the watcher's own last
   * capture) was captured, false after `timeoutMs` without a change, so a watcher of a still screen
   * need not capture to find out. Captures others make in between hide nothing from it.
   */
  waitForChange?(since: RawImage | undefined, timeoutMs: number): Promise<boolean>;
  /** Optional: starts recording where the screen changes (undefined: this backend cannot see it). */
  watchChanges?(): ChangeWatch | undefined;
  /**
   * Optional: when the screen last changed noticeably (ms since the epoch; small changes such as a
   * blinking caret are not counted), or undefined when the backend cannot tell.
   */
  lastScreenChange?(): Promise<number | undefined>;

  // pointer
  cursorPosition(): Promise<Point>;
  moveCursor(to: Point): Promise<void>;
  mouseButton(button: MouseButton, action: "down" | "up"): Promise<void>;
  /**
   * Optional: `count` clicks of `button`, at `at` when given, sent together (one round trip where
   * the backend can). Without it, commands use `moveCursor` and `mouseButton`.
   */
  click?(button: MouseButton, count: number, at?: Point): Promise<void>;
  /** Wheel notches; positive `dy` scrolls up, positive `dx` scrolls right. */
  scroll(dx: number, dy: number): Promise<void>;

  // keyboard
  /**
   * Presses or releases one key given by its canonical name (`normalizeKey` in keys.ts): a named key
   * (`enter`, `ctrl`, `f5`) or a single character, which gets Shift/AltGr as its layout needs.
   */
  key(key: string, action: "down" | "up"): Promise<void>;
  /** Types any Unicode text exactly, whatever the keyboard layout; stops soon after `signal` aborts. */
  typeText(text: string, signal?: AbortSignal): Promise<void>;

  // clipboard
  readClipboard(): Promise<string>;
  writeClipboard(text: string): Promise<void>;

  // windows
  listWindows(): Promise<WindowInfo[]>;
  activeWindow(): Promise<WindowInfo | null>;
  setWindowBounds(id: string, bounds: Partial<Rect>): Promise<void>;
  windowAction(id: string, action: "activate" | "minimize" | "maximize" | "close"): Promise<void>;

  /** Environment variables a program started on this desktop needs (e.g. `DISPLAY`). */
  readonly env?: Readonly<Record<string, string>>;

  /** The desktop environment or window manager, lowercase (`openbox`, `gnome`, `mac`, `windows`). */
  environment?(): Promise<string>;

  /** Releases connections; the backend is not used afterwards. */
  close(): Promise<void>;
}

/** Nothing listens on the display: trying again at once would not help (no retry). */
export class DisplayAbsentError extends CommandError {
  constructor(message: string) {
    super("unavailable", message);
  }
}

/** Hands out the current backend, connecting or reconnecting as needed. */
export type DesktopProvider = () => Promise<DesktopBackend>;

/** The provider of a server with no desktop at all. */
export const noDesktop: DesktopProvider = async () => {
  throw new CommandError("unavailable", "No desktop is available: this server was started without a display");
};
