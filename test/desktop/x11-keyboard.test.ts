/**
 * Keyboard commands against a real Xvfb + openbox: bytes are read back from an xterm running a
 * raw-mode recorder, and text from a GTK entry that writes its content to a file.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  APPS,
  type DesktopServer,
  eventually,
  focusWindow,
  PYTHON,
  startDesktopServer,
  startRecorderTerminal,
} from "../support/desktop.js";

const SYMBOLS = "~`!@#$%^&*()_+-={}[]|\\:;\"'<>,.?/";
const UNICODE = "héllo wörld ñ ç ß É — «» ✓ 日本語 中文 한국어 😀🎉";

describe("keyboard commands (X11)", () => {
  let desk: DesktopServer;
  let xterm: number;

  beforeAll(async () => {
    desk = await startDesktopServer({ width: 1024, height: 768 });
    xterm = await startRecorderTerminal(desk);
  });
  afterAll(() => desk?.stop());

  const focus = (id: number) => focusWindow(desk, id);

  /** What the recorder receives while `action` runs (waits until `expected` bytes arrived). */
  async function received(action: () => Promise<unknown>, expected: string): Promise<string> {
    await focus(xterm);
    const before = desk.readBytes("raw.bin").length;
    await action();
    const wanted = Buffer.byteLength(expected, "utf8");
    const fresh = () => desk.readBytes("raw.bin").subarray(before);
    const bytes = await eventually(() => (fresh().length >= wanted ? fresh() : null)).catch(fresh);
    return bytes.toString("utf8");
  }

  it("types ASCII symbols, accents, CJK and emoji exactly into an xterm", async () => {
    const text = `Hello ${SYMBOLS} ${UNICODE}`;
    const got = await received(async () => {
      expect((await desk.cmd("type_text", { text })).success).toBe(true);
    }, text);
    expect(got).toBe(text);
  });

  it("types more distinct non-keymap characters than there are spare keycodes, exactly", async () => {
    const text = Array.from({ length: 40 }, (_, i) => String.fromCodePoint(0x4e00 + i * 7)).join("");
    const got = await received(() => desk.cmd("type", { text }), text);
    expect(got).toBe(text);
  });

  it("types two clients' texts one after the other, never interleaved", async () => {
    const first = `first: ${Array.from({ length: 12 }, (_, i) => String.fromCodePoint(0x3041 + i)).join("")} end1;`;
    const second = `second: ${Array.from({ length: 12 }, (_, i) => String.fromCodePoint(0x30a1 + i)).join("")} end2;`;
    const got = await received(async () => {
      const events = await Promise.all([
        desk.cmd("type_text", { text: first }),
        desk.cmd("type_text", { text: second }),
      ]);
      expect(events.every((e) => e.success)).toBe(true);
    }, first + second);
    expect([first + second, second + first]).toContain(got);
  });

  it("presses named keys and combinations as the terminal sees them", async () => {
    const cases: [string, unknown, string][] = [
      ["press_key", { key: "Return" }, "\r"],
      ["press_key", { key: "ESC" }, "\x1b"],
      ["press_key", { key: "Up" }, "\x1b[A"],
      ["press_key", { key: "F5" }, "\x1b[15~"],
      ["press_key", { key: "PgDn" }, "\x1b[6~"],
      ["press_key", { key: "page_up" }, "\x1b[5~"],
      ["press_key", { key: "del" }, "\x1b[3~"],
      ["key", { key: "%" }, "%"],
      ["press_key", { key: "A" }, "A"],
      ["hotkey", { keys: ["ctrl", "a"] }, "\x01"],
      ["hotkey", { keys: ["Control", "C"] }, "\x03"],
      ["hotkey", { keys: ["shift", "tab"] }, "\x1b[Z"],
      ["hotkey", { keys: ["alt", "x"] }, "\x1bx"],
      ["hotkey", { keys: ["option", "y"] }, "\x1by"],
    ];
    for (const [command, params, bytes] of cases) {
      const got = await received(async () => {
        const event = await desk.cmd(command, params);
        expect(event.success, `${command} ${JSON.stringify(params)}: ${event.error}`).toBe(true);
      }, bytes);
      expect(JSON.stringify(got), `${command} ${JSON.stringify(params)}`).toBe(JSON.stringify(bytes));
    }
  });

  it("holds a key with key_down until key_up", async () => {
    const got = await received(async () => {
      await desk.cmd("key_down", { key: "shift" });
      await desk.cmd("press_key", { key: "b" });
      await desk.cmd("key_up", { key: "shift" });
      await desk.cmd("press_key", { key: "b" });
    }, "Bb");
    expect(got).toBe("Bb");
  });

  /**
   * The keycodes on which the server's keymap has `keysym` (a name such as KP_0) without a modifier,
   * from xmodmap: KP_0's own keypad key needs NumLock for it, so these are the spare keycodes.
   */
  async function keycodesOf(keysym: string): Promise<number[]> {
    const stdout = await desk.run("xmodmap", ["-pke"]);
    return stdout
      .split("\n")
      .filter((line) => line.split("=")[1]?.trim().split(/\s+/)[0] === keysym)
      .map((line) => Number(/keycode\s+(\d+)/.exec(line)?.[1]));
  }

  it("keeps a key on no key of the layout mapped after press_key: the next one takes another keycode", async () => {
    // KP_0 and KP_1 are the second level of the keypad's keys (NumLock's): each gets a spare keycode.
    // Remapping KP_0's at once for KP_1 would let a client that reads the events late see KP_1 twice.
    expect((await desk.cmd("press_key", { key: "KP_0 KP_1" })).success).toBe(true);
    const [zero, one] = [await keycodesOf("KP_0"), await keycodesOf("KP_1")];
    expect(zero.length).toBeGreaterThan(0);
    expect(one.length).toBeGreaterThan(0);
    expect(zero.filter((keycode) => one.includes(keycode))).toEqual([]);
  });

  it("keeps a held key's keycode while other keys need every spare one", async () => {
    expect(await desk.cmd("key_down", { key: "KP_5" })).toMatchObject({ success: true });
    try {
      const held = await keycodesOf("KP_5");
      // More distinct characters on no key than there are spare keycodes: every other one is reused.
      const text = Array.from({ length: 40 }, (_, i) => String.fromCodePoint(0x4e10 + i * 5)).join("");
      const typed = await desk.cmd("type_text", { text });
      expect(typed, JSON.stringify(typed)).toMatchObject({ success: true });
      expect(await keycodesOf("KP_5")).toEqual(held);
    } finally {
      expect(await desk.cmd("key_up", { key: "KP_5" })).toMatchObject({ success: true });
    }
  });

  it("rejects an unknown key with invalid_params naming it", async () => {
    for (const [command, params, name] of [
      ["press_key", { key: "nosuchkey" }, "nosuchkey"],
      ["key_down", { key: "hyperdrive" }, "hyperdrive"],
      ["hotkey", { keys: ["ctrl", "warp9"] }, "warp9"],
      ["left_click", { modifiers: ["turbo"] }, "turbo"],
    ] as const) {
      const event = await desk.cmd(command, params);
      expect(event).toMatchObject({ success: false, code: "invalid_params" });
      expect(event.error).toContain(`Unknown`);
      expect(event.error).toContain(name);
    }
  });

  it("types Unicode exactly into a GTK entry", async () => {
    desk.spawn(PYTHON, [join(APPS, "entry.py"), join(desk.dir, "entry.txt"), "gtkentry"]);
    const id = await desk.waitForWindow("gtkentry");
    await focus(id);
    const text = `Grüße ${SYMBOLS} ${UNICODE} fin`;
    expect((await desk.cmd("type_text", { text })).success).toBe(true);
    const got = await eventually(() =>
      desk.read("entry.txt").length >= text.length ? desk.read("entry.txt") : null,
    ).catch(() => desk.read("entry.txt"));
    expect(got).toBe(text);

    // More distinct characters than the keymap has spare keycodes: some keycodes are remapped
    // while GTK is still catching up with the previous keymap changes.
    const many = Array.from({ length: 45 }, (_, i) => String.fromCodePoint(0x4e00 + i * 11)).join("");
    expect((await desk.cmd("type_text", { text: many })).success).toBe(true);
    const after = await eventually(
      () => (desk.read("entry.txt").length >= text.length + many.length ? desk.read("entry.txt") : null),
      15_000,
    ).catch(() => desk.read("entry.txt"));
    expect(after).toBe(text + many);
  });
});
