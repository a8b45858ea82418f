/**
 * Top-level windows through the EWMH hints of the window manager (openbox, or any EWMH one):
 * `_NET_CLIENT_LIST`, `_NET_ACTIVE_WINDOW`, `_NET_WM_NAME`, `_NET_WM_PID`, `_NET_WM_STATE`, and
 * the client messages `_NET_ACTIVE_WINDOW`, `_NET_MOVERESIZE_WINDOW`, `_NET_CLOSE_WINDOW`,
 * `WM_CHANGE_STATE`. Bounds are those of the client area, in screen pixels.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { CommandError } from "../../common/errors.js";
import type { Rect, WindowInfo } from "../backend.js";
import type { XConnection } from "./connection.js";

const ANY_TYPE = 0;
const ICONIC_STATE = 3;
/** `_NET_WM_DESKTOP` of a window shown on every desktop. */
const ALL_DESKTOPS = 0xffffffff;
const STATIC_GRAVITY = 10;
/** Source indication of EWMH client messages: 2 = a pager or other direct user action. */
const SOURCE_USER = 2;
const EFFECT_TIMEOUT_MS = 1000;

interface Property {
  type: number;
  format: number;
  data: Buffer;
}

export class Windows {
  constructor(private readonly conn: XConnection) {}

  async list(): Promise<WindowInfo[]> {
    const [ids, active] = await Promise.all([this.clientIds(), this.activeId()]);
    const infos = await Promise.all(ids.map((id) => this.describe(id, id === active).catch(() => null)));
    return infos.filter((info): info is WindowInfo => info !== null);
  }

  async active(): Promise<WindowInfo | null> {
    const id = await this.activeId();
    if (!id) return null;
    return this.describe(id, true).catch(() => null);
  }

  async setBounds(idText: string, bounds: Partial<Rect>): Promise<void> {
    const id = await this.requireWindow(idText);
    const before = await this.geometry(id);
    const flags =
      STATIC_GRAVITY |
      (bounds.x !== undefined ? 1 << 8 : 0) |
      (bounds.y !== undefined ? 1 << 9 : 0) |
      (bounds.width !== undefined ? 1 << 10 : 0) |
      (bounds.height !== undefined ? 1 << 11 : 0) |
      (SOURCE_USER << 12);
    await this.message(id, "_NET_MOVERESIZE_WINDOW", [
      flags,
      bounds.x ?? 0,
      bounds.y ?? 0,
      bounds.width ?? 0,
      bounds.height ?? 0,
    ]);
    const wanted = { ...before, ...bounds };
    await this.waitFor(async () => {
      const now = await this.geometry(id);
      return (
        now.x === wanted.x && now.y === wanted.y && now.width === wanted.width && now.height === wanted.height
      );
    });
  }

  async act(idText: string, action: "activate" | "minimize" | "maximize" | "close"): Promise<void> {
    const id = await this.requireWindow(idText);
    switch (action) {
      case "activate":
        return this.activate(id, idText);
      case "minimize":
        await this.message(id, "WM_CHANGE_STATE", [ICONIC_STATE]);
        await this.waitFor(() => this.isMinimized(id));
        return;
      case "maximize": {
        const vert = await this.conn.atom("_NET_WM_STATE_MAXIMIZED_VERT");
        const horz = await this.conn.atom("_NET_WM_STATE_MAXIMIZED_HORZ");
        await this.message(id, "_NET_WM_STATE", [1, vert, horz, SOURCE_USER]);
        await this.waitFor(async () => {
          const state = await this.atomList(id, "_NET_WM_STATE");
          return state.includes(vert) && state.includes(horz);
        });
        return;
      }
      case "close":
        await this.message(id, "_NET_CLOSE_WINDOW", [0, SOURCE_USER]);
        await this.waitFor(async () => !(await this.clientIds()).includes(id));
        return;
    }
  }

  /**
   * Brings a window to the front wherever it is: to its desktop, out of the taskbar, raised and
   * focused; then checks `_NET_ACTIVE_WINDOW` and says so when the window manager did not comply.
   */
  private async activate(id: number, idText: string): Promise<void> {
    const [[desktop], [current]] = await Promise.all([
      this.atomList(id, "_NET_WM_DESKTOP"),
      this.atomList(this.conn.root, "_NET_CURRENT_DESKTOP"),
    ]);
    if (desktop !== undefined && desktop !== ALL_DESKTOPS && current !== undefined && desktop !== current) {
      await this.message(this.conn.root, "_NET_CURRENT_DESKTOP", [desktop, 0]);
    }
    // An iconified window is brought back by mapping it (ICCCM 4.1.4).
    if (await this.isMinimized(id)) this.conn.X.MapWindow(id);
    await this.message(id, "_NET_ACTIVE_WINDOW", [SOURCE_USER, 0, 0]);
    const done = await this.waitFor(
      async () => (await this.activeId()) === id && !(await this.isMinimized(id)),
    );
    if (!done) {
      throw new CommandError("failed", `The window manager did not activate window ${idText}`);
    }
  }

  /** The window manager's name (`openbox`), from `_NET_SUPPORTING_WM_CHECK`. */
  async windowManagerName(): Promise<string | null> {
    const [check] = await this.windowList(this.conn.root, "_NET_SUPPORTING_WM_CHECK");
    if (!check) return null;
    return (await this.title(check)) || null;
  }

  private async describe(id: number, active: boolean): Promise<WindowInfo> {
    const [title, pid, wmClass, bounds, minimized] = await Promise.all([
      this.title(id),
      this.cardinal(id, "_NET_WM_PID"),
      this.property(id, "WM_CLASS"),
      this.geometry(id),
      this.isMinimized(id),
    ]);
    const classes = wmClass.data.toString("latin1").split("\0").filter(Boolean);
    return {
      id: String(id),
      title,
      pid: pid ?? null,
      appName: classes[1] ?? classes[0] ?? null,
      bounds,
      active,
      minimized,
    };
  }

  private async requireWindow(idText: string): Promise<number> {
    const id = parseWindowId(idText);
    if (id === null || !(await this.clientIds()).includes(id)) {
      throw new CommandError("not_found", `Window not found: ${idText}`);
    }
    return id;
  }

  private async clientIds(): Promise<number[]> {
    return this.windowList(this.conn.root, "_NET_CLIENT_LIST");
  }

  private async activeId(): Promise<number | null> {
    const [id] = await this.windowList(this.conn.root, "_NET_ACTIVE_WINDOW");
    return id ? id : null;
  }

  private async geometry(id: number): Promise<Rect> {
    const { X, root } = this.conn;
    const geometry = await this.conn.call<{ width: number; height: number }>((cb) => X.GetGeometry(id, cb));
    const origin = await this.conn.call<{ destX: number; destY: number }>((cb) =>
      X.TranslateCoordinates(id, root, 0, 0, cb),
    );
    return { x: origin.destX, y: origin.destY, width: geometry.width, height: geometry.height };
  }

  private async isMinimized(id: number): Promise<boolean> {
    const [wmState, netState, hidden] = await Promise.all([
      this.property(id, "WM_STATE"),
      this.atomList(id, "_NET_WM_STATE"),
      this.conn.atom("_NET_WM_STATE_HIDDEN"),
    ]);
    return (
      (wmState.data.length >= 4 && wmState.data.readUInt32LE(0) === ICONIC_STATE) || netState.includes(hidden)
    );
  }

  private async title(id: number): Promise<string> {
    const netName = await this.property(id, "_NET_WM_NAME");
    if (netName.data.length > 0) return netName.data.toString("utf8");
    const name = await this.property(id, "WM_NAME");
    return name.data.toString(name.type === (await this.conn.atom("UTF8_STRING")) ? "utf8" : "latin1");
  }

  private async cardinal(id: number, name: string): Promise<number | undefined> {
    const prop = await this.property(id, name);
    return prop.format === 32 && prop.data.length >= 4 ? prop.data.readUInt32LE(0) : undefined;
  }

  private async windowList(id: number, name: string): Promise<number[]> {
    return this.atomList(id, name);
  }

  private async atomList(id: number, name: string): Promise<number[]> {
    const prop = await this.property(id, name);
    if (prop.format !== 32) return [];
    const values: number[] = [];
    for (let offset = 0; offset + 4 <= prop.data.length; offset += 4)
      values.push(prop.data.readUInt32LE(offset));
    return values;
  }

  private async property(id: number, name: string): Promise<Property> {
    const atom = await this.conn.atom(name);
    return this.conn.call<Property>((cb) => this.conn.X.GetProperty(0, id, atom, ANY_TYPE, 0, 1 << 16, cb));
  }

  /** Sends an EWMH client message about window `id` to the root window (to the window manager). */
  private async message(id: number, type: string, data: number[]) {
    const atom = await this.conn.atom(type);
    const { X, root } = this.conn;
    await this.conn.call<void>((cb) =>
      X.SendClientMessage(root, id, atom, 32, data, (err: Error | null) => cb(err, undefined)),
    );
  }

  /** Waits (briefly) until the window manager has carried a request out: false if it has not. */
  private async waitFor(done: () => Promise<boolean>): Promise<boolean> {
    const deadline = performance.now() + EFFECT_TIMEOUT_MS;
    while (performance.now() < deadline) {
      if (await done().catch(() => true)) return true;
      await sleep(5);
    }
    return false;
  }
}

/** A window id given as a number, a decimal string or a `0x…` hexadecimal string. */
export function parseWindowId(text: string): number | null {
  const trimmed = text.trim();
  const value = /^0x[0-9a-f]+$/i.test(trimmed)
    ? Number.parseInt(trimmed, 16)
    : /^\d+$/.test(trimmed)
      ? Number(trimmed)
      : Number.NaN;
  return Number.isSafeInteger(value) && value > 0 && value <= 0xffffffff ? value : null;
}
