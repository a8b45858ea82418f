/**
 * The Linux/X11 desktop backend: one persistent X connection (pure-JavaScript `x11` package) for
 * capture (MIT-SHM), input (XTEST) and windows (EWMH); the clipboard through xclip.
 *
 * @example
 * const desktop = await X11Backend.connect(":1");
 * await desktop.moveCursor({ x: 10, y: 20 });
 * const image = await desktop.capture();
 */
import type {
  ChangeWatch,
  DesktopBackend,
  MouseButton,
  Point,
  RawImage,
  Rect,
  Size,
  WindowInfo,
} from "../backend.js";
import { ScreenCapture } from "./capture.js";
import { readClipboard, writeClipboard } from "./clipboard.js";
import { XConnection } from "./connection.js";
import { Keyboard } from "./keyboard.js";
import { Windows } from "./windows.js";

const BUTTON_PRESS = 4;
const BUTTON_RELEASE = 5;
const MOTION_NOTIFY = 6;
const BUTTONS: Record<MouseButton, number> = { left: 1, middle: 2, right: 3, back: 8, forward: 9 };
const WHEEL = { up: 4, down: 5, left: 6, right: 7 };
/** Button1Mask … Button5Mask of the core protocol's key-and-button mask, by button number. */
const BUTTON_MASKS: Record<number, number | undefined> = {
  1: 0x100,
  2: 0x200,
  3: 0x400,
  4: 0x800,
  5: 0x1000,
};
/** The longest a click waits for a window manager to let its events through. */
const BUTTON_SETTLE_MS = 1000;
/** More notches than this in one call are surely a mistake (a pixel count?). */
const MAX_NOTCHES = 1000;

/** X coordinates are 16-bit; the server clamps them to the screen. */
const coordinate = (v: number) => Math.max(-32768, Math.min(32767, Math.round(v)));

export class X11Backend implements DesktopBackend {
  readonly name = "x11";
  /** The last button event sent, until it is known to be processed (see `settled`). */
  private unsettled?: { button: MouseButton; down: boolean };
  private settling?: Promise<void>;

  private constructor(
    private readonly conn: XConnection,
    // biome-ignore lint/suspicious/noExplicitAny: the XTEST extension object of the x11 package
    private readonly xtest: any,
    private readonly screen: ScreenCapture,
    private readonly keyboard: Keyboard,
    private readonly windows: Windows,
  ) {}

  /**
   * Connects to an X display (`:N`); fails with `unavailable` when it cannot.
   * @param options.useShm false to capture with the core `GetImage` only (default: MIT-SHM when usable)
   */
  static async connect(display: string, options: { useShm?: boolean } = {}): Promise<X11Backend> {
    const conn = await XConnection.open(display);
    try {
      const xtest = await conn.extension("xtest");
      const [screen, keyboard] = await Promise.all([
        ScreenCapture.create(conn, options.useShm ?? true),
        Keyboard.create(conn, xtest),
      ]);
      return new X11Backend(conn, xtest, screen, keyboard, new Windows(conn));
    } catch (err) {
      conn.close();
      throw err;
    }
  }

  get display(): string {
    return this.conn.display;
  }

  get env(): Record<string, string> {
    return { DISPLAY: this.conn.display };
  }

  get alive(): boolean {
    return this.conn.alive;
  }

  /** Called once when the X server goes away. */
  onClose(listener: (reason: string) => void) {
    this.conn.onClose(listener);
  }

  /** `shm` or `core`: how the screen is read. */
  get captureMethod(): "shm" | "core" {
    return this.screen.method;
  }

  screenSize(): Promise<Size> {
    return this.screen.screenSize();
  }

  waitForChange(since: RawImage | undefined, timeoutMs: number): Promise<boolean> {
    return this.screen.waitForChange(since, timeoutMs);
  }

  watchChanges(): ChangeWatch | undefined {
    return this.screen.watch();
  }

  lastScreenChange(): Promise<number | undefined> {
    return this.screen.lastChange();
  }

  async capture(region?: Rect): Promise<RawImage> {
    await this.settled();
    return this.screen.capture(region);
  }

  async cursorPosition(): Promise<Point> {
    await this.settled();
    const pointer = await this.conn.call<{ rootX: number; rootY: number }>((cb) =>
      this.conn.X.QueryPointer(this.conn.root, cb),
    );
    return { x: pointer.rootX, y: pointer.rootY };
  }

  async moveCursor(to: Point): Promise<void> {
    await this.settled();
    this.fake(MOTION_NOTIFY, 0, coordinate(to.x), coordinate(to.y));
    await this.conn.sync();
  }

  /**
   * The motion and every press and release go out together and one round trip waits for all: the X
   * server applies requests in order, so the clicks land where the pointer was moved, as when each
   * was awaited (which cost a round trip apiece).
   */
  async click(button: MouseButton, count: number, at?: Point): Promise<void> {
    await this.settled();
    if (at) this.fake(MOTION_NOTIFY, 0, coordinate(at.x), coordinate(at.y));
    for (let i = 0; i < count; i++) {
      this.fake(BUTTON_PRESS, BUTTONS[button]);
      this.fake(BUTTON_RELEASE, BUTTONS[button]);
    }
    this.unsettled = { button, down: false };
    await this.conn.sync();
  }

  async mouseButton(button: MouseButton, action: "down" | "up"): Promise<void> {
    await this.settled();
    this.fake(action === "down" ? BUTTON_PRESS : BUTTON_RELEASE, BUTTONS[button]);
    this.unsettled = { button, down: action === "down" };
    await this.conn.sync();
  }

  /**
   * Waits until the X server has processed the last button event, not only received it. A window
   * manager that binds presses on windows (openbox's click to focus) freezes the pointer at each
   * press until it replays it; events sent meanwhile queue up behind: the next command's motion
   * overtook a queued release, and once a whole click was lost (1 in ~100 double clicks under
   * load), and keys typed after a click could reach the window focused before it.
   *
   * A click is answered once the X server has its events (as cua's server does); this wait is
   * paid by whatever comes next on this desktop (input, a capture, a window or pointer query),
   * usually after the window manager has long replayed the press.
   */
  private settled(): Promise<void> {
    if (this.unsettled) {
      const { button, down } = this.unsettled;
      this.unsettled = undefined;
      // Shared: a capture or a query running beside the next input command waits for the same.
      const waiting: Promise<void> = this.buttonSettled(button, down).finally(() => {
        if (this.settling === waiting) this.settling = undefined;
      });
      this.settling = waiting;
    }
    return this.settling ?? Promise.resolve();
  }

  /**
   * The button state in QueryPointer changes only once its event is processed, so this asks until
   * it shows, round trip after round trip (one when nothing is frozen; at most BUTTON_SETTLE_MS).
   */
  private async buttonSettled(button: MouseButton, down: boolean): Promise<void> {
    const mask = BUTTON_MASKS[BUTTONS[button]];
    const deadline = performance.now() + BUTTON_SETTLE_MS;
    for (;;) {
      const pointer = await this.conn.call<{ keyMask: number }>((cb) =>
        this.conn.X.QueryPointer(this.conn.root, cb),
      );
      // Buttons 8 and 9 have no bit in the mask: one round trip is all that can be done for them.
      if (mask === undefined || Boolean(pointer.keyMask & mask) === down) return;
      // The next round trip is the wait: the window manager replays within a fraction of a ms.
      if (performance.now() > deadline) return;
    }
  }

  async scroll(dx: number, dy: number): Promise<void> {
    await this.settled();
    const notches = (count: number, button: number) => {
      for (let i = 0; i < Math.min(Math.abs(Math.round(count)), MAX_NOTCHES); i++) {
        this.fake(BUTTON_PRESS, button);
        this.fake(BUTTON_RELEASE, button);
      }
    };
    notches(dy, dy > 0 ? WHEEL.up : WHEEL.down);
    notches(dx, dx > 0 ? WHEEL.right : WHEEL.left);
    await this.conn.sync();
  }

  async key(key: string, action: "down" | "up"): Promise<void> {
    await this.settled();
    return this.keyboard.key(key, action);
  }

  async typeText(text: string, signal?: AbortSignal): Promise<void> {
    await this.settled();
    return this.keyboard.typeText(text, signal);
  }

  readClipboard(): Promise<string> {
    this.conn.ensureAlive();
    return readClipboard(this.conn.display);
  }

  writeClipboard(text: string): Promise<void> {
    this.conn.ensureAlive();
    return writeClipboard(this.conn.display, text);
  }

  async listWindows(): Promise<WindowInfo[]> {
    await this.settled();
    return this.windows.list();
  }

  async activeWindow(): Promise<WindowInfo | null> {
    await this.settled();
    return this.windows.active();
  }

  async setWindowBounds(id: string, bounds: Partial<Rect>): Promise<void> {
    await this.settled();
    return this.windows.setBounds(id, bounds);
  }

  async windowAction(id: string, action: "activate" | "minimize" | "maximize" | "close"): Promise<void> {
    await this.settled();
    return this.windows.act(id, action);
  }

  async environment(): Promise<string> {
    const wm = await this.windows.windowManagerName();
    return wm ? wm.toLowerCase() : "unknown";
  }

  async close(): Promise<void> {
    if (!this.conn.alive) return;
    this.keyboard.restore();
    this.screen.close();
    await this.conn.sync().catch(() => undefined);
    this.conn.close();
  }

  private fake(type: number, detail: number, x = 0, y = 0) {
    this.conn.ensureAlive();
    this.xtest.FakeInput(type, detail, 0, type === MOTION_NOTIFY ? this.conn.root : 0, x, y);
  }
}
