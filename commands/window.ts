/** Windows and applications: list, inspect, move, resize, activate, close; launch and open. */
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import { type CommandContext, defineCommand } from "../src/computer/core/command.js";
import type { DesktopBackend, WindowInfo } from "../src/desktop/backend.js";
import { readImageFile, setX11Wallpaper } from "../src/desktop/wallpaper.js";
import { launchDetached, openWithDefaultApp } from "../src/os/launch.js";

const windowIdParam = z
  .union([z.number().int().nonnegative(), z.string().trim().min(1).max(64)])
  .transform((id) => {
    const text = String(id);
    // X11 ids are often written in hexadecimal (xdotool, wmctrl): accept 0x… too.
    return /^0x[0-9a-f]{1,8}$/i.test(text) ? String(Number.parseInt(text, 16)) : text;
  })
  .describe("A window id from get_application_windows or get_current_window_id (decimal or 0x…)");
const windowIdResult = z.union([z.number(), z.string()]);
const done = z.object({ success: z.boolean() });

/** Window ids are integers on X11 and Windows; cua clients expect them as numbers. */
function publicId(id: string): number | string {
  return /^\d+$/.test(id) ? Number(id) : id;
}

async function findWindow(desktop: DesktopBackend, id: string): Promise<WindowInfo> {
  const wanted = publicId(id);
  const found = (await desktop.listWindows()).find((w) => publicId(w.id) === wanted || w.id === id);
  if (!found) throw new CommandError("not_found", `Window not found: ${id}`);
  return found;
}

async function activeWindow(ctx: CommandContext): Promise<WindowInfo> {
  const active = await (await ctx.desktop()).activeWindow();
  if (!active) throw new CommandError("not_found", "No active window");
  return active;
}

export const getApplicationWindows = defineCommand({
  name: "get_application_windows",
  description:
    "Ids of the windows whose title or application name contains `app` (case-insensitive); every " +
    "window when `app` is left out.",
  params: z.object({ app: z.string().max(1000).nullish() }),
  result: z.object({ windows: z.array(windowIdResult) }),
  handler: async ({ app }, ctx) => {
    const wanted = (app ?? "").toLowerCase();
    const windows = await (await ctx.desktop()).listWindows();
    const matches = windows.filter(
      (w) => w.title.toLowerCase().includes(wanted) || (w.appName ?? "").toLowerCase().includes(wanted),
    );
    return { windows: matches.map((w) => publicId(w.id)) };
  },
});

export const getCurrentWindowId = defineCommand({
  name: "get_current_window_id",
  description: "The id of the active (focused) window.",
  params: z.object({}),
  result: z.object({ window_id: windowIdResult }),
  handler: async (_params, ctx) => ({ window_id: publicId((await activeWindow(ctx)).id) }),
});

export const getWindowName = defineCommand({
  name: "get_window_name",
  description: "A window's title.",
  params: z.object({ window_id: windowIdParam }),
  result: z.object({ name: z.string() }),
  handler: async ({ window_id }, ctx) => ({ name: (await findWindow(await ctx.desktop(), window_id)).title }),
});

export const getWindowSize = defineCommand({
  name: "get_window_size",
  description: "A window's size in pixels (its client area).",
  params: z.object({ window_id: windowIdParam }),
  result: z.object({ width: z.number(), height: z.number() }),
  handler: async ({ window_id }, ctx) => {
    const { width, height } = (await findWindow(await ctx.desktop(), window_id)).bounds;
    return { width, height };
  },
});

export const getWindowPosition = defineCommand({
  name: "get_window_position",
  description: "Where a window's client area starts on the screen.",
  params: z.object({ window_id: windowIdParam }),
  result: z.object({ x: z.number(), y: z.number() }),
  handler: async ({ window_id }, ctx) => {
    const { x, y } = (await findWindow(await ctx.desktop(), window_id)).bounds;
    return { x, y };
  },
});

const size = z.number().int().min(1).max(32_767);
const position = z.number().int().min(-32_768).max(32_767);

export const setWindowSize = defineCommand({
  name: "set_window_size",
  description: "Resizes a window's client area.",
  params: z.object({ window_id: windowIdParam, width: size, height: size }),
  result: done,
  handler: async ({ window_id, width, height }, ctx) => {
    await (await ctx.desktop()).setWindowBounds(window_id, { width, height });
    return { success: true };
  },
});

export const setWindowPosition = defineCommand({
  name: "set_window_position",
  description: "Moves a window so that its client area starts at x,y.",
  params: z.object({ window_id: windowIdParam, x: position, y: position }),
  result: done,
  handler: async ({ window_id, x, y }, ctx) => {
    await (await ctx.desktop()).setWindowBounds(window_id, { x, y });
    return { success: true };
  },
});

function windowActionCommand(action: "maximize" | "minimize" | "activate" | "close", description: string) {
  return defineCommand({
    name: `${action}_window`,
    description,
    params: z.object({ window_id: windowIdParam }),
    result: done,
    handler: async ({ window_id }, ctx) => {
      await (await ctx.desktop()).windowAction(window_id, action);
      return { success: true };
    },
  });
}

export const maximizeWindow = windowActionCommand("maximize", "Maximizes a window.");
export const minimizeWindow = windowActionCommand("minimize", "Minimizes (iconifies) a window.");
export const activateWindow = windowActionCommand("activate", "Raises a window and gives it the focus.");
export const closeWindow = windowActionCommand("close", "Asks a window to close, as its close button would.");

const bounds = z.object({ x: z.number(), y: z.number(), width: z.number(), height: z.number() });

export const getActiveWindowBounds = defineCommand({
  name: "get_active_window_bounds",
  description:
    "Position and size of the active window: in `bounds` (what cua's Python SDK reads) and beside it.",
  params: z.object({}),
  result: bounds.extend({ bounds }),
  handler: async (_params, ctx) => {
    const { x, y, width, height } = (await activeWindow(ctx)).bounds;
    return { x, y, width, height, bounds: { x, y, width, height } };
  },
});

export const getActiveWindowTitle = defineCommand({
  name: "get_active_window_title",
  description: "The title of the active window.",
  params: z.object({}),
  result: z.object({ title: z.string() }),
  handler: async (_params, ctx) => ({ title: (await activeWindow(ctx)).title }),
});

/** The desktop's environment variables when there is a desktop, else none beyond the server's. */
async function desktopEnv(ctx: CommandContext) {
  try {
    return (await ctx.desktop()).env ?? {};
  } catch {
    return {};
  }
}

export const launch = defineCommand({
  name: "launch",
  description:
    "Starts an application: `app` run with `args` directly, or without args `app` as a shell command line. " +
    "Does not wait for it.",
  params: z.object({
    app: z.string().min(1).max(10_000),
    args: z.array(z.string().max(10_000)).max(1000).nullish(),
  }),
  result: z.object({ pid: z.number() }),
  handler: async ({ app, args }, ctx) => ({
    pid: await launchDetached(app, args ?? null, { env: await desktopEnv(ctx), user: ctx.commandUser }),
  }),
});

export const open = defineCommand({
  name: "open",
  description: "Opens a URL or a file with the default application. Does not wait for it.",
  params: z.object({ target: z.string().min(1).max(10_000) }),
  result: done,
  handler: async ({ target }, ctx) => {
    await openWithDefaultApp(target, { env: await desktopEnv(ctx), user: ctx.commandUser });
    return { success: true };
  },
});

const KNOWN_DESKTOPS = [
  "gnome",
  "unity",
  "cinnamon",
  "mate",
  "xfce4",
  "lxde",
  "fluxbox",
  "blackbox",
  "openbox",
  "icewm",
  "jwm",
  "afterstep",
  "trinity",
  "kde",
  "razor-qt",
  "windowmaker",
];

export const getDesktopEnvironment = defineCommand({
  name: "get_desktop_environment",
  description: "The desktop environment: windows, mac, or on Linux gnome, kde, xfce4, openbox, … or unknown.",
  params: z.object({}),
  result: z.object({ environment: z.string() }),
  handler: async (_params, ctx) => {
    if (process.platform === "win32") return { environment: "windows" };
    if (process.platform === "darwin") return { environment: "mac" };
    const session = (process.env.XDG_CURRENT_DESKTOP ?? process.env.DESKTOP_SESSION ?? "").toLowerCase();
    const named = KNOWN_DESKTOPS.find((name) => session.includes(name === "xfce4" ? "xfce" : name));
    if (named) return { environment: named };
    try {
      const desktop = await ctx.desktop();
      return { environment: (await desktop.environment?.()) ?? "unknown" };
    } catch {
      return { environment: "unknown" };
    }
  },
});

export const setWallpaper = defineCommand({
  name: "set_wallpaper",
  description:
    "Sets the desktop's wallpaper from an image file (PNG, JPEG, WebP, …), scaled to fill the screen.",
  params: z.object({ path: z.string().min(1, "must not be empty").describe("the image file") }),
  result: done,
  handler: async ({ path }, ctx) => {
    const desktop = await ctx.desktop();
    const display = desktop.env?.DISPLAY;
    if (process.platform !== "linux" || !display) {
      throw new CommandError("not_supported", "set_wallpaper is supported on X11 desktops only");
    }
    const image = await readImageFile(path, ctx.files);
    await setX11Wallpaper(image, { DISPLAY: display });
    return { success: true };
  },
});

export default [
  getApplicationWindows,
  getCurrentWindowId,
  getWindowName,
  getWindowSize,
  getWindowPosition,
  setWindowSize,
  setWindowPosition,
  maximizeWindow,
  minimizeWindow,
  activateWindow,
  closeWindow,
  getActiveWindowBounds,
  getActiveWindowTitle,
  launch,
  open,
  getDesktopEnvironment,
  setWallpaper,
];
