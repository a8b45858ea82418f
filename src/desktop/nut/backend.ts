/**
 * The nut-js desktop backend, for macOS and Windows (and X11, where the tests run it). nut-js runs
 * in a worker process (worker.ts) so that its crashes cost a restart, not the server; this class
 * turns the backend interface into worker operations and works around nut-js's traps: text is
 * typed key by key with Shift for shifted symbols, and pasted when a character has no key.
 *
 * @example
 * const desktop = await NutBackend.connect(":1");
 * await desktop.typeText("héllo ✓");
 */
import { CommandError } from "../../common/errors.js";
import type { Logger } from "../../common/logger.js";
import type { DesktopBackend, MouseButton, Point, RawImage, Rect, Size, WindowInfo } from "../backend.js";
import { strokesForKey, strokesForText } from "./key-strokes.js";
import { NativeServices } from "./native-services.js";
import { pasteText } from "./paste.js";
import type { DesktopServices } from "./services.js";
import { NutWorker } from "./worker-client.js";
import { X11Services } from "./x11-services.js";

export const USES_X11 = process.platform !== "darwin" && process.platform !== "win32";

export interface NutBackendOptions {
  /** Variables of the desktop (on X11 `DISPLAY` is required), on top of the server's own. */
  env?: Record<string, string>;
  log?: Logger;
  /** How long one nut-js operation may take before its worker is killed (default 15 s). */
  callTimeoutMs?: number;
}

export class NutBackend implements DesktopBackend {
  readonly name = "nut";
  readonly env: Readonly<Record<string, string>>;
  private readonly worker: NutWorker;
  private readonly services: DesktopServices;
  private closed = false;
  private lastFrame: { id: string; image: RawImage } | null = null;
  private readonly closeListeners: ((reason: string) => void)[] = [];

  constructor(options: NutBackendOptions = {}) {
    this.env = { ...options.env };
    const display = this.env.DISPLAY ?? process.env.DISPLAY ?? "";
    let services: DesktopServices | null = null;
    this.worker = new NutWorker({ ...options, check: () => services!.check() });
    services = USES_X11 ? new X11Services(display) : new NativeServices(this.worker);
    this.services = services;
  }

  /** A backend whose worker is already running; `unavailable` when the display cannot be used. */
  static async connect(display: string, options: Omit<NutBackendOptions, "env"> = {}): Promise<NutBackend> {
    const backend = new NutBackend({ ...options, env: USES_X11 ? { DISPLAY: display } : {} });
    try {
      await backend.ready();
      return backend;
    } catch (err) {
      await backend.close();
      throw err;
    }
  }

  /**
   * True until closed: when nut-js dies with its display, the next call starts it again, so this
   * backend never needs replacing.
   */
  get alive(): boolean {
    return !this.closed;
  }

  onClose(listener: (reason: string) => void) {
    this.closeListeners.push(listener);
  }

  /** Starts nut-js if it is not running; `unavailable` when the display cannot be used. */
  async ready(): Promise<void> {
    await this.worker.ready();
  }

  screenSize(): Promise<Size> {
    return this.worker.call("screenSize", {});
  }

  /** An unchanged screen gives the same RawImage object again (the encoder then reuses its work). */
  async capture(region?: Rect): Promise<RawImage> {
    const last = this.lastFrame;
    let frame = await this.worker.call("capture", { region, known: last?.id });
    if (frame.data === null) {
      if (last && frame.id === last.id) return last.image;
      frame = await this.worker.call("capture", { region });
    }
    const { data } = frame;
    if (data === null) throw new CommandError("internal", "nut-js worker sent no pixels");
    const image: RawImage = {
      width: frame.width,
      height: frame.height,
      channels: 4,
      data: Buffer.from(data.buffer, data.byteOffset, data.byteLength),
    };
    this.lastFrame = { id: frame.id, image };
    return image;
  }

  cursorPosition(): Promise<Point> {
    return this.worker.call("cursorPosition", {});
  }

  async moveCursor(to: Point): Promise<void> {
    await this.worker.call("moveCursor", { x: Math.round(to.x), y: Math.round(to.y) });
  }

  async mouseButton(button: MouseButton, action: "down" | "up"): Promise<void> {
    if (button === "back" || button === "forward") {
      throw new CommandError("unavailable", `The ${this.name} backend has no ${button} mouse button`);
    }
    await this.worker.call("mouseButton", { button, action });
  }

  async scroll(dx: number, dy: number): Promise<void> {
    await this.worker.call("scroll", { dx: Math.round(dx), dy: Math.round(dy) });
  }

  async key(key: string, action: "down" | "up"): Promise<void> {
    const strokes = strokesForKey(key, action);
    if (strokes) await this.worker.call("keys", { strokes });
    // A character without a key is entered whole when pressed; releasing it has nothing to do.
    else if (action === "down") await this.paste(key);
  }

  async typeText(text: string): Promise<void> {
    if (text.length === 0) return;
    const strokes = strokesForText(text);
    if (strokes) await this.worker.call("keys", { strokes });
    else await this.paste(text);
  }

  private async paste(text: string): Promise<void> {
    const x11 = this.services instanceof X11Services ? this.services : null;
    const focused = x11 ? await x11.activeWindow().catch(() => null) : null;
    await pasteText(
      this.worker,
      text,
      x11
        ? {
            focusedApp: focused?.appName,
            selectionOwner: (s) => x11.selectionOwner(s),
            waitForNewOwner: (s, before) => x11.waitForNewOwner(s, before),
          }
        : undefined,
    );
  }

  readClipboard(): Promise<string> {
    return this.services.readClipboard();
  }

  writeClipboard(text: string): Promise<void> {
    return this.services.writeClipboard(text);
  }

  listWindows(): Promise<WindowInfo[]> {
    return this.services.listWindows();
  }

  activeWindow(): Promise<WindowInfo | null> {
    return this.services.activeWindow();
  }

  setWindowBounds(id: string, bounds: Partial<Rect>): Promise<void> {
    return this.services.setWindowBounds(id, bounds);
  }

  windowAction(id: string, action: "activate" | "minimize" | "maximize" | "close"): Promise<void> {
    return this.services.windowAction(id, action);
  }

  environment(): Promise<string> {
    return this.services.environment();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.services.close();
    await this.worker.close();
    for (const listener of this.closeListeners) listener("closed");
  }
}
