/**
 * Window, application and clipboard commands against a real Xvfb + openbox, read back with
 * xwininfo, xdotool, xprop, wmctrl and xclip.
 */
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APPS, type DesktopServer, eventually, PYTHON, startDesktopServer } from "../support/desktop.js";

describe("windows and applications (X11)", () => {
  let desk: DesktopServer;
  let alpha: number;
  let beta: number;

  beforeAll(async () => {
    desk = await startDesktopServer({ width: 1280, height: 800 });
    desk.spawn(PYTHON, [join(APPS, "entry.py"), join(desk.dir, "a.txt"), "window alpha"]);
    alpha = await desk.waitForWindow("window alpha");
    desk.spawn(PYTHON, [join(APPS, "entry.py"), join(desk.dir, "b.txt"), "window beta"]);
    beta = await desk.waitForWindow("window beta");
  });
  afterAll(() => desk?.stop());

  const activeWindow = async () => Number((await desk.run("xdotool", ["getactivewindow"])).trim());

  it("finds windows by title, case-insensitively, and names them", async () => {
    const found = await desk.cmd("get_application_windows", { app: "WINDOW ALPHA" });
    expect(found).toMatchObject({ success: true, windows: [alpha] });
    const both = await desk.cmd("get_application_windows", { app: "window" });
    expect([...both.windows].sort()).toEqual([alpha, beta].sort());
    expect((await desk.cmd("get_window_name", { window_id: alpha })).name).toBe("window alpha");
    // Ids are accepted as strings and in hexadecimal too.
    expect((await desk.cmd("get_window_name", { window_id: `0x${beta.toString(16)}` })).name).toBe(
      "window beta",
    );
  });

  it("reports size and position as xwininfo sees them", async () => {
    const geometry = await desk.geometry(alpha);
    const size = await desk.cmd("get_window_size", { window_id: String(alpha) });
    expect({ width: size.width, height: size.height }).toEqual({
      width: geometry.width,
      height: geometry.height,
    });
    const position = await desk.cmd("get_window_position", { window_id: alpha });
    expect({ x: position.x, y: position.y }).toEqual({ x: geometry.x, y: geometry.y });
  });

  it("moves and resizes a window", async () => {
    expect((await desk.cmd("set_window_position", { window_id: alpha, x: 300, y: 220 })).success).toBe(true);
    await eventually(async () => {
      const g = await desk.geometry(alpha);
      return g.x === 300 && g.y === 220;
    });
    expect((await desk.cmd("set_window_size", { window_id: alpha, width: 640, height: 210 })).success).toBe(
      true,
    );
    const geometry = await eventually(async () => {
      const g = await desk.geometry(alpha);
      return g.width === 640 && g.height === 210 ? g : null;
    });
    expect(geometry).toEqual({ x: 300, y: 220, width: 640, height: 210 });
    const position = await desk.cmd("get_window_position", { window_id: alpha });
    expect([position.x, position.y]).toEqual([300, 220]);
  });

  it("activates a window and reports the active one", async () => {
    expect((await desk.cmd("activate_window", { window_id: beta })).success).toBe(true);
    await eventually(async () => (await activeWindow()) === beta);
    expect((await desk.cmd("activate_window", { window_id: alpha })).success).toBe(true);
    await eventually(async () => (await activeWindow()) === alpha);
    expect((await desk.cmd("get_current_window_id")).window_id).toBe(alpha);
    expect((await desk.cmd("get_active_window_title")).title).toBe("window alpha");
    const bounds = await desk.cmd("get_active_window_bounds");
    const geometry = await desk.geometry(alpha);
    expect({ x: bounds.x, y: bounds.y, width: bounds.width, height: bounds.height }).toEqual(geometry);
  });

  it("maximizes a window", async () => {
    expect((await desk.cmd("maximize_window", { window_id: beta })).success).toBe(true);
    const state = await eventually(async () => {
      const out = await desk.run("xprop", ["-id", String(beta), "_NET_WM_STATE"]);
      return out.includes("_NET_WM_STATE_MAXIMIZED_VERT") && out.includes("_NET_WM_STATE_MAXIMIZED_HORZ");
    });
    expect(state).toBe(true);
    const geometry = await eventually(async () => {
      const g = await desk.geometry(beta);
      return g.width > 1200 ? g : null;
    });
    expect(geometry.height).toBeGreaterThan(700);
  });

  it("minimizes a window", async () => {
    expect((await desk.cmd("minimize_window", { window_id: beta })).success).toBe(true);
    const iconic = await eventually(async () =>
      (await desk.run("xprop", ["-id", String(beta), "WM_STATE"])).includes("Iconic"),
    );
    expect(iconic).toBe(true);
  });

  it("closes a window", async () => {
    expect((await desk.cmd("close_window", { window_id: beta })).success).toBe(true);
    await eventually(async () => !(await desk.run("wmctrl", ["-l"])).includes("window beta"));
    const after = await desk.cmd("get_application_windows", { app: "window beta" });
    expect(after.windows).toEqual([]);
  });

  it("fails with not_found for a window that does not exist", async () => {
    for (const [command, params] of [
      ["get_window_name", {}],
      ["activate_window", {}],
      ["set_window_size", { width: 10, height: 10 }],
    ] as const) {
      const event = await desk.cmd(command, { window_id: 12345, ...params });
      expect(event).toMatchObject({ success: false, code: "not_found" });
      expect(event.error).toContain("Window not found: 12345");
    }
  });

  it("launches an application with args, or as a command line, on this desktop", async () => {
    const launched = await desk.cmd("launch", { app: "xterm", args: ["-title", "launched one"] });
    expect(launched.success).toBe(true);
    const pidOf = async (title: string) => {
      const id = await desk.waitForWindow(title);
      return eventually(async () => Number((await desk.run("xdotool", ["getwindowpid", String(id)])).trim()));
    };
    expect(await pidOf("launched one")).toBe(launched.pid);
    process.kill(launched.pid);

    const shell = await desk.cmd("launch", { app: "exec xterm -title 'launched two'" });
    expect(shell.success).toBe(true);
    // `exec` replaces the shell, so the window's pid is the one launch reported.
    expect(await pidOf("launched two")).toBe(shell.pid);
    process.kill(shell.pid);

    const missing = await desk.cmd("launch", { app: "no-such-program-here", args: ["x"] });
    expect(missing).toMatchObject({ success: false, code: "not_found" });
  });

  it("opens a target with the desktop's opener, on this display", async () => {
    const bin = join(desk.dir, "bin");
    mkdirSync(bin);
    const opener = join(bin, "xdg-open");
    writeFileSync(opener, `#!/bin/sh\necho "$DISPLAY $1" > '${join(desk.dir, "opened.txt")}'\n`);
    chmodSync(opener, 0o755);
    const savedPath = process.env.PATH;
    process.env.PATH = `${bin}:${savedPath}`;
    try {
      expect((await desk.cmd("open", { target: "https://example.com/a b" })).success).toBe(true);
      const opened = await eventually(() => desk.read("opened.txt"));
      expect(opened.trim()).toBe(`${desk.display.display} https://example.com/a b`);
      process.env.PATH = join(desk.dir, "empty");
      const none = await desk.cmd("open", { target: "/tmp" });
      expect(none).toMatchObject({ success: false, code: "not_supported" });
      expect(none.error).toContain("xdg-open");
    } finally {
      process.env.PATH = savedPath;
    }
  });

  it("names the window manager as the desktop environment", async () => {
    const saved = { xdg: process.env.XDG_CURRENT_DESKTOP, session: process.env.DESKTOP_SESSION };
    delete process.env.XDG_CURRENT_DESKTOP;
    delete process.env.DESKTOP_SESSION;
    try {
      expect((await desk.cmd("get_desktop_environment")).environment).toBe("openbox");
    } finally {
      if (saved.xdg !== undefined) process.env.XDG_CURRENT_DESKTOP = saved.xdg;
      if (saved.session !== undefined) process.env.DESKTOP_SESSION = saved.session;
    }
  });
});

describe("clipboard (X11)", () => {
  let desk: DesktopServer;
  beforeAll(async () => {
    desk = await startDesktopServer({ width: 800, height: 600 });
  });
  afterAll(() => desk?.stop());

  it("reads an empty clipboard as an empty string", async () => {
    const event = await desk.cmd("copy_to_clipboard");
    expect(event).toMatchObject({ success: true, content: "" });
  });

  it("sets the clipboard with Unicode text, as xclip reads it", async () => {
    const text = "héllo ✓ 日本語 😀\nsecond line\twith a tab";
    expect((await desk.cmd("set_clipboard", { text })).success).toBe(true);
    expect(await desk.run("xclip", ["-selection", "clipboard", "-o"])).toBe(text);
  });

  it("reads what another program put on the clipboard; the result is the text itself", async () => {
    await desk.run("sh", ["-c", "printf 'from outside ✓ ñ' | xclip -selection clipboard -i >/dev/null 2>&1"]);
    // xclip's parent returns when it forks; the child may claim the selection a moment later (its
    // request leaves Xlib's buffer at its first event wait): the program owns it once xclip -o reads it.
    await eventually(
      async () =>
        (await desk.run("xclip", ["-selection", "clipboard", "-o"]).catch(() => "")) === "from outside ✓ ñ",
    );
    const event = await desk.cmd("copy_to_clipboard");
    expect(event).toMatchObject({ success: true, content: "from outside ✓ ñ" });
  });

  it("reads back at once what it has just set, every time", async () => {
    for (let i = 0; i < 15; i++) {
      expect((await desk.cmd("set_clipboard", { text: `round ${i} ✓` })).success).toBe(true);
      expect((await desk.cmd("copy_to_clipboard")).content).toBe(`round ${i} ✓`);
    }
  });
});
