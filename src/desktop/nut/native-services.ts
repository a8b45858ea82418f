/**
 * Windows and clipboard through nut-js's own API, for macOS and Windows. nut-js can list, focus,
 * move and resize windows, but not minimize, maximize or close them.
 */
import { CommandError } from "../../common/errors.js";
import type { Rect, WindowInfo } from "../backend.js";
import type { NutWindow } from "./protocol.js";
import type { DesktopServices } from "./services.js";
import type { NutWorker } from "./worker-client.js";

export class NativeServices implements DesktopServices {
  constructor(private readonly worker: NutWorker) {}

  async check(): Promise<void> {}

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
    const current = await this.bounds(handle);
    const { x = current.x, y = current.y, width = current.width, height = current.height } = bounds;
    if (x !== current.x || y !== current.y) await this.worker.call("moveWindow", { handle, x, y });
    if (width !== current.width || height !== current.height) {
      await this.worker.call("resizeWindow", { handle, width, height });
    }
  }

  async windowAction(id: string, action: "activate" | "minimize" | "maximize" | "close"): Promise<void> {
    const handle = parseHandle(id);
    if (action !== "activate") throw new CommandError("not_supported", `nut-js cannot ${action} windows`);
    await this.worker.call("focusWindow", { handle });
  }

  readClipboard(): Promise<string> {
    return this.worker.call("readClipboard", {});
  }

  async writeClipboard(text: string): Promise<void> {
    await this.worker.call("writeClipboard", { text });
  }

  async environment(): Promise<string> {
    return process.platform === "darwin"
      ? "mac"
      : process.platform === "win32"
        ? "windows"
        : process.platform;
  }

  close(): void {}

  private async bounds(handle: number): Promise<Rect> {
    const window = await this.worker.call("describeWindow", { handle }).catch(() => null);
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
  const text = id.trim();
  const handle = /^(0x[0-9a-f]+|\d+)$/i.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(handle)) throw new CommandError("invalid_params", `Not a window id: ${id}`);
  return handle;
}
