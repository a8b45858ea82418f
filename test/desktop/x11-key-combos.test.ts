/**
 * press_key in xdotool's syntax and with any keysym name X11 knows, read back from outside: `xev`
 * prints every key event its window receives, with the keysym's name.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DesktopServer, eventually, startDesktopServer } from "../support/desktop.js";

describe("press_key combinations and keysym names (X11)", () => {
  let desk: DesktopServer;
  let xev: ChildProcess;
  let log = "";

  beforeAll(async () => {
    desk = await startDesktopServer({ width: 800, height: 600 });
    xev = spawn("xev", ["-name", "keylog", "-event", "keyboard"], {
      env: desk.env,
      stdio: ["ignore", "pipe", "ignore"],
    });
    xev.stdout!.on("data", (d) => {
      log += String(d);
    });
    const id = await desk.waitForWindow("keylog");
    await eventually(async () => {
      await desk.run("xdotool", ["windowactivate", String(id)]).catch(() => undefined);
      return (await desk.run("xdotool", ["getactivewindow"])).trim() === String(id);
    });
  });
  afterAll(async () => {
    xev?.kill();
    await desk?.stop();
  });

  /** The key events (press/release and keysym name) that xev sees while `key` is pressed. */
  async function events(key: string, count: number): Promise<string[]> {
    log = "";
    const reply = await desk.cmd("press_key", { key });
    expect(reply, key).toMatchObject({ success: true });
    const parse = () =>
      [...log.matchAll(/(KeyPress|KeyRelease) event[\s\S]*?keysym 0x[0-9a-f]+, ([A-Za-z0-9_]+)\)/g)].map(
        (m) => `${m[1] === "KeyPress" ? "+" : "-"}${m[2]}`,
      );
    return eventually(() => (parse().length >= count ? parse() : null));
  }

  it("presses keysym names X11 knows, in any case, XF86 ones with or without the prefix", async () => {
    expect(await events("KP_Enter", 2)).toEqual(["+KP_Enter", "-KP_Enter"]);
    expect(await events("kp_add", 2)).toEqual(["+KP_Add", "-KP_Add"]);
    expect(await events("XF86AudioMute", 2)).toEqual(["+XF86AudioMute", "-XF86AudioMute"]);
    expect(await events("audiomute", 2)).toEqual(["+XF86AudioMute", "-XF86AudioMute"]);
  });

  it("presses keypad digits as digits, with no Shift held (KP_0 is not Shift+KP_Insert)", async () => {
    expect(await events("KP_0", 2)).toEqual(["+KP_0", "-KP_0"]);
    expect(await events("KP_1", 2)).toEqual(["+KP_1", "-KP_1"]);
    expect(await events("KP_Decimal", 2)).toEqual(["+KP_Decimal", "-KP_Decimal"]);
    // And the key under KP_0 still types its first keysym.
    expect(await events("KP_Insert", 2)).toEqual(["+KP_Insert", "-KP_Insert"]);
  });

  it("holds modifiers for a combination, in order, and releases them in reverse", async () => {
    expect(await events("ctrl+l", 4)).toEqual(["+Control_L", "+l", "-l", "-Control_L"]);
    // With Shift held, xev names the key by its shifted keysym.
    expect(await events("ctrl+shift+t", 6)).toEqual([
      "+Control_L",
      "+Shift_L",
      "+T",
      "-T",
      "-Shift_L",
      "-Control_L",
    ]);
    expect(await events("super+l", 4)).toEqual(["+Super_L", "+l", "-l", "-Super_L"]);
    // + needs Shift on this keymap: the backend adds it, as it does when typing.
    expect(await events("ctrl++", 6)).toEqual([
      "+Control_L",
      "+Shift_L",
      "+plus",
      "-plus",
      "-Shift_L",
      "-Control_L",
    ]);
  });

  it("presses a space-separated sequence in turn, and a spelled-out single key as one", async () => {
    expect(await events("ctrl+a BackSpace", 6)).toEqual([
      "+Control_L",
      "+a",
      "-a",
      "-Control_L",
      "+BackSpace",
      "-BackSpace",
    ]);
    expect(await events("page down", 2)).toEqual(["+Next", "-Next"]);
  });

  it("names the part it does not know, and how keys are written", async () => {
    const reply = await desk.cmd("press_key", { key: "ctrl+nokey" });
    expect(reply).toMatchObject({ success: false, code: "invalid_params" });
    expect(reply.error).toMatch(
      /^Invalid params: key: Unknown key: 'nokey' in 'ctrl\+nokey'; keys are names \(enter, esc/,
    );
    for (const key of ["constructor", "__proto__", "toString"]) {
      expect((await desk.cmd("press_key", { key })).code, key).toBe("invalid_params");
    }
  });
});
