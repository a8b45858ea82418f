/**
 * The virtual desktop's window manager keeps windows where an agent can see them: one desktop, no
 * desktop switch on a wheel turn; activate_window brings back minimized windows and windows of other
 * desktops, and says so when it cannot. Read back with xprop, xdotool, wmctrl and xwininfo.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APPS, type DesktopServer, eventually, PYTHON, startDesktopServer } from "../support/desktop.js";

describe("the window manager of the virtual desktop", () => {
  let desk: DesktopServer;
  let alpha: number;
  let beta: number;

  beforeAll(async () => {
    desk = await startDesktopServer({ width: 1024, height: 768 });
    desk.spawn(PYTHON, [join(APPS, "entry.py"), join(desk.dir, "a.txt"), "wm alpha"]);
    alpha = await desk.waitForWindow("wm alpha");
    desk.spawn(PYTHON, [join(APPS, "entry.py"), join(desk.dir, "b.txt"), "wm beta"]);
    beta = await desk.waitForWindow("wm beta");
  });
  afterAll(() => desk?.stop());

  const rootCardinal = async (name: string) =>
    Number(/= (\d+)/.exec(await desk.run("xprop", ["-root", name]))?.[1]);
  const activeWindow = async () => Number((await desk.run("xdotool", ["getactivewindow"])).trim());
  const visible = async (id: number) =>
    /Map State: IsViewable/.test(await desk.run("xwininfo", ["-id", String(id)]));

  it("has one desktop, and a wheel turn over the bare desktop leaves every window in view", async () => {
    expect(await rootCardinal("_NET_NUMBER_OF_DESKTOPS")).toBe(1);
    // The bottom right corner is bare desktop: both windows are placed centred and small.
    for (const [x, y] of [
      [1020, 764],
      [2, 764],
    ]) {
      expect((await desk.cmd("move_cursor", { x, y })).success).toBe(true);
      expect((await desk.cmd("scroll", { x: 0, y: -3 })).success).toBe(true);
      expect((await desk.cmd("scroll", { x: 0, y: 3 })).success).toBe(true);
    }
    expect(await rootCardinal("_NET_CURRENT_DESKTOP")).toBe(0);
    expect(await visible(alpha)).toBe(true);
    expect(await visible(beta)).toBe(true);
  });

  it("sends keys typed right after a click to the window clicked (click to focus)", async () => {
    await desk.cmd("set_window_position", { window_id: alpha, x: 40, y: 120 });
    await desk.cmd("set_window_position", { window_id: beta, x: 40, y: 420 });
    const entryOf = async (id: number) => {
      const at = await desk.geometry(id);
      return { x: at.x + 100, y: at.y + 40 };
    };
    await eventually(async () => (await entryOf(beta)).y - (await entryOf(alpha)).y >= 200);
    const points = { a: await entryOf(alpha), b: await entryOf(beta) };
    // Back to back, the focus changing each time: each click's press is held by the window manager
    // until it has focused the window, and the keys must not overtake it. (GTK selects an entry's
    // text when it gets the focus: the key typed replaces it.)
    for (let i = 0; i < 12; i++) {
      const [target, other] = i % 2 === 0 ? ["b", "a"] : ["a", "b"];
      const untouched = desk.read(`${other}.txt`);
      expect((await desk.cmd("left_click", points[target as "a" | "b"])).success).toBe(true);
      expect((await desk.cmd("type_text", { text: String(i % 10) })).success).toBe(true);
      await eventually(() => desk.read(`${target}.txt`).endsWith(String(i % 10)), 10_000);
      expect(desk.read(`${other}.txt`)).toBe(untouched);
    }
  });

  it("lists every window when get_application_windows is given no app", async () => {
    const all = await desk.cmd("get_application_windows", {});
    expect(all.success).toBe(true);
    expect(all.windows).toEqual(expect.arrayContaining([alpha, beta]));
  });

  it("brings a minimized window back, raised and focused", async () => {
    await desk.run("xdotool", ["windowminimize", String(alpha)]);
    await eventually(async () => !(await visible(alpha)));
    expect((await desk.cmd("activate_window", { window_id: alpha })).success).toBe(true);
    expect(await visible(alpha)).toBe(true);
    expect(await activeWindow()).toBe(alpha);
  });

  it("switches to the desktop of a window on another one", async () => {
    // A desktop of several workspaces, as a person's own session may have.
    await desk.run("wmctrl", ["-n", "2"]);
    await eventually(async () => (await rootCardinal("_NET_NUMBER_OF_DESKTOPS")) === 2);
    await desk.run("wmctrl", ["-i", "-r", String(beta), "-t", "1"]);
    await eventually(async () => !(await visible(beta)));
    expect((await desk.cmd("activate_window", { window_id: beta })).success).toBe(true);
    expect(await rootCardinal("_NET_CURRENT_DESKTOP")).toBe(1);
    expect(await activeWindow()).toBe(beta);
    expect(await visible(beta)).toBe(true);
    await desk.run("wmctrl", ["-i", "-r", String(beta), "-t", "0"]);
    await desk.run("wmctrl", ["-s", "0"]);
    await desk.run("wmctrl", ["-n", "1"]);
  });
});

describe("launch", () => {
  let desk: DesktopServer;
  beforeAll(async () => {
    desk = await startDesktopServer({ width: 640, height: 480 });
  });
  afterAll(() => desk?.stop());

  it("answers not_found for a program that is not there, with or without arguments", async () => {
    for (const params of [
      { app: "no-such-program-here" },
      { app: "no-such-program-here --flag" },
      { app: "no-such-program-here", args: ["x"] },
    ]) {
      const reply = await desk.cmd("launch", params);
      expect(reply).toMatchObject({ success: false, code: "not_found" });
      expect(reply.error).toBe("No such program: no-such-program-here (not found on PATH)");
    }
    expect(await desk.cmd("launch", { app: "/tmp/no/such/program" })).toMatchObject({
      success: false,
      error: "No such program: /tmp/no/such/program (not an executable file)",
    });
  });

  it("starts a program found on PATH, and leaves shell syntax to the shell", async () => {
    const marker = join(desk.dir, "launched");
    const started = await desk.cmd("launch", { app: "sh", args: ["-c", `echo started > ${marker}`] });
    expect(started).toMatchObject({ success: true, pid: expect.any(Number) });
    await eventually(() => desk.read("launched") === "started\n");
    const shell = await desk.cmd("launch", { app: `MARK=1 sh -c 'echo $MARK > ${join(desk.dir, "shell")}'` });
    expect(shell.success).toBe(true);
    await eventually(() => desk.read("shell") === "1\n");
  });
});
