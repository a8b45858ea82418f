/**
 * What the nut-js backend needs besides input and capture: windows, the clipboard and the name of
 * the desktop. nut-js's own window list is useless on X11 (window-manager frames without titles),
 * so there these come from EWMH (x11-services.ts); elsewhere from nut-js (native-services.ts).
 */
import type { Rect, WindowInfo } from "../backend.js";

export interface DesktopServices {
  /** Resolves when the desktop can be used; `unavailable` saying why when it cannot. */
  check(): Promise<void>;
  listWindows(): Promise<WindowInfo[]>;
  activeWindow(): Promise<WindowInfo | null>;
  setWindowBounds(id: string, bounds: Partial<Rect>): Promise<void>;
  windowAction(id: string, action: "activate" | "minimize" | "maximize" | "close"): Promise<void>;
  readClipboard(): Promise<string>;
  writeClipboard(text: string): Promise<void>;
  environment(): Promise<string>;
  close(): void;
}
