/**
 * The nut-js desktop backend, for macOS and Windows (and X11, where the tests run it). nut-js runs
 * in a worker process (worker.ts) so that its crashes cost a restart, not the server; this class
 * turns the backend interface into worker operations and works around nut-js's traps:
 * text is typed key by key with Shift for shifted symbols, and pasted when a character has no key.
 */
import { CommandError } from "../../common/errors.js";
import type { Logger } from "../../common/logger.js";
import type {
  DesktopBackend,
  MouseButton,
  Point,
  RawImage,
  Rect,
  Size,
  WindowInfo,
} from "../backend.js";
import { strokesForKey, strokesForText } from "./key-strokes.js";
import { pasteText } from "./paste.js";
import type { NutWindow } from "./protocol.js";
import { NutWorker, type NutWorkerOptions } from "./worker-client.js";
import { readSelection, writeSelection } from "./x11-selection.js";

const USES_X11 = process.platform !== "darwin" && process.platform !== "win32";

export interface NutBackendOptions extends NutWorkerOptions {
  log?: Logger;
}

export class NutBackend implements DesktopBackend {
  readonly name = "nut";
  private readonly worker: NutWorker;

  constructor(options: NutBackendOptions = {}) {
    this.worker = new NutWorker(options);
  }

  /** Starts nut-js if it is not running; `unavailable` when the display cannot be used. */
  async ready(): Promise<void> {
    await this.worker.ready();
  }

  screenSize(): Promise<Size> {
    return this.worker.call("screenSize", {});
  }

  async capture(region?: Rect): Promise<RawImage> {
    const image = await this.worker.call("capture", { region });
    const data = Buffer.from(image.data.buffer, image.data.byteOffset, image.data.byteLength);
    return { width: image.width, height: image.height, channels: 4, data };
  }

  cursorPosition(): Promise<Point> {
    return this.worker.call("cursorPosition", {});
  }

  async moveCursor(to: Point): Promise<void> {
    await this.worker.call("moveCursor", { x: Math.round(to.x), y: Math.round(to.y) });
  }

  async mouseButton(button: MouseButton, action: "down" | "up"): Promise<void> {
    await this.worker.call("mouseButton", { button, action });
  }

  async scroll(dx: number, dy: number): Promise<void> {
    await this.worker.call("scroll", { dx: Math.round(dx), dy: Math.round(dy) });
  }

  async key(key: string, action: "down" | "up"): Promise<void> {
    const strokes = strokesForKey(key, action);
    if (strokes) await this.worker.call("keys", { strokes });
    // A character without a key is entered whole when pressed; releasing it has nothing to do.
    else if (action === "down") await pasteText(this.worker, key);
  }

  async typeText(text: string): Promise<void> {
    if (text.length === 0) return;
    const strokes = strokesForText(text);
    if (strokes) await this.worker.call("keys", { strokes });
    else await pasteText(this.worker, text);
  }

  async readClipboard(): Promise<string> {
    if (USES_X11) return (await readSelection("clipboard", this.worker.env)) ?? "";
    return this.worker.call("readClipboard", {});
  }

  async writeClipboard(text: string): Promise<void> {
    if (USES_X11) await writeSelection("clipboard", text, this.worker.env);
    else await this.worker.call("writeClipboard", { text });
  }

  async listWindows(): Promise<WindowInfo[]> {
    const [windows, active] = await Promise.all([
      this.worker.call("listWindows", {}),
      this.worker.call("activeWindow", {}),
    ]);
    return windows.map((w) => windowInfo(w, w.handle === active?.handle));
  }

  async activeWindow(): Promise<WindowInfo | null> {
    const active = await this.worker.call("activeWindow", {});
    return active ? windowInfo(active, true) : null;
  }

  async setWindowBounds(id: string, bounds: Partial<Rect>): Promise<void> {
    const handle = parseHandle(id);
    const { x, y, width, height } = bounds;
    if (x !== undefined || y !== undefined) {
      const current = x === undefined || y === undefined ? await this.windowBounds(handle) : null;
      await this.worker.call("moveWindow", { handle, x: x ?? current!.x, y: y ?? current!.y });
    }
    if (width !== undefined || height !== undefined) {
      const current = width === undefined || height === undefined ? await this.windowBounds(handle) : null;
      await this.worker.call("resizeWindow", {
        handle,
        width: width ?? current!.width,
        height: height ?? current!.height,
      });
    }
  }

  async windowAction(id: string, action: "activate" | "minimize" | "maximize" | "close"): Promise<void> {
    const handle = parseHandle(id);
    if (action !== "activate") {
      throw new CommandError("not_supported", `The nut-js backend cannot ${action} windows`);
    }
    await this.worker.call("focusWindow", { handle });
  }

  async environment(): Promise<string> {
    if (process.platform === "darwin") return "mac";
    if (process.platform === "win32") return "windows";
    return "x11";
  }

  close(): Promise<void> {
    return this.worker.close();
  }

  private async windowBounds(handle: number): Promise<Rect> {
    const window = (await this.worker.call("listWindows", {})).find((w) => w.handle === handle);
    if (!window) throw new CommandError("not_found", `No window with id ${handle}`);
    return window.bounds;
  }
}

function windowInfo(window: NutWindow, active: boolean): WindowInfo {
  return {
    id: String(window.handle),
    title: window.title,
    pid: null,
    appName: null,
    bounds: window.bounds,
    active,
    minimized: false,
  };
}

function parseHandle(id: string): number {
  const handle = /^(0x[0-9a-f]+|\d+)$/i.test(id.trim()) ? Number(id.trim()) : Number.NaN;
  if (!Number.isSafeInteger(handle)) throw new CommandError("invalid_params", `Not a window id: ${id}`);
  return handle;
}
