/**
 * Windows, clipboard and a display check for the nut-js backend on X11, shared with the X11
 * backend: EWMH over a pure-JavaScript X connection (which, unlike nut-js, survives the display
 * going away) and xclip. The connection is opened lazily and again after the display comes back.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { CommandError } from "../../common/errors.js";
import type { Rect, WindowInfo } from "../backend.js";
import type { Selection } from "../x11/clipboard.js";
import { readClipboard, writeClipboard } from "../x11/clipboard.js";
import { XConnection } from "../x11/connection.js";
import { Windows } from "../x11/windows.js";
import type { DesktopServices } from "./services.js";

export class X11Services implements DesktopServices {
  private connection: Promise<XConnection> | null = null;

  constructor(private readonly display: string) {}

  /** Opening an X connection proves the display is there before nut-js, which would crash, opens it. */
  async check(): Promise<void> {
    await this.windows();
  }

  async listWindows(): Promise<WindowInfo[]> {
    return (await this.windows()).list();
  }

  async activeWindow(): Promise<WindowInfo | null> {
    return (await this.windows()).active();
  }

  async setWindowBounds(id: string, bounds: Partial<Rect>): Promise<void> {
    await (await this.windows()).setBounds(id, bounds);
  }

  async windowAction(id: string, action: "activate" | "minimize" | "maximize" | "close"): Promise<void> {
    await (await this.windows()).act(id, action);
  }

  readClipboard(): Promise<string> {
    return readClipboard(this.display);
  }

  async writeClipboard(text: string): Promise<void> {
    const before = await this.selectionOwner("clipboard");
    await writeClipboard(this.display, text);
    await this.waitForNewOwner("clipboard", before);
  }

  async environment(): Promise<string> {
    const name = await (await this.windows()).windowManagerName();
    return name ? name.toLowerCase() : "unknown";
  }

  /** The window owning a selection, 0 when none. */
  async selectionOwner(selection: Selection): Promise<number> {
    const conn = await this.connect();
    const atom = await conn.atom(selection.toUpperCase());
    return conn.call<number>((cb) => conn.X.GetSelectionOwner(atom, cb));
  }

  /**
   * Waits until a selection has an owner other than `before`: xclip can exit (or say it is ready)
   * before its claim has reached the X server, and a paste or read right then sees the old owner.
   */
  async waitForNewOwner(selection: Selection, before: number, timeoutMs = 2000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const owner = await this.selectionOwner(selection);
      if (owner !== 0 && owner !== before) return;
      if (Date.now() > deadline)
        throw new CommandError("failed", `The ${selection} did not change owner in time`);
      await sleep(1);
    }
  }

  close(): void {
    const pending = this.connection;
    this.connection = null;
    pending?.then((conn) => conn.close()).catch(() => undefined);
  }

  private async windows(): Promise<Windows> {
    return new Windows(await this.connect());
  }

  private connect(): Promise<XConnection> {
    if (!this.display) {
      return Promise.reject(
        new CommandError("unavailable", "No display: DISPLAY is not set for the nut-js backend"),
      );
    }
    const pending = this.connection ?? XConnection.open(this.display);
    this.connection = pending;
    const forget = () => {
      if (this.connection === pending) this.connection = null;
    };
    return pending.then(
      (conn) => {
        if (conn.alive) return conn;
        forget();
        return XConnection.open(this.display).then((fresh) => {
          this.connection = Promise.resolve(fresh);
          return fresh;
        });
      },
      (err) => {
        forget();
        throw err;
      },
    );
  }
}
