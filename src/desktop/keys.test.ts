import { describe, expect, it } from "vitest";
import { CommandError } from "../common/errors.js";
import { keysymOf, NAMED_KEYS, normalizeCombo, normalizeKey } from "./keys.js";
import { textToKeysyms } from "./x11/keyboard.js";

describe("key names", () => {
  it("accepts the union of cua's spellings, case-insensitively, as one canonical name each", () => {
    const cases: Record<string, string[]> = {
      enter: ["enter", "Return", "RETURN", "\n"],
      escape: ["esc", "Escape", "ESC"],
      delete: ["del", "Delete", "DEL"],
      pagedown: ["pagedown", "page_down", "Page Down", "PgDn", "Next"],
      pageup: ["pageup", "page_up", "pgup", "Prior"],
      meta: ["win", "super", "meta", "cmd", "command", "windows", "Super_L", "⌘"],
      alt: ["alt", "option", "Alt_L"],
      ctrl: ["ctrl", "control", "Control_L", "CTRL"],
      shift: ["shift", "Shift_L"],
      caps_lock: ["caps_lock", "CapsLock"],
      print_screen: ["print_screen", "PrintScreen", "prtsc"],
      up: ["up", "ArrowUp"],
      backspace: ["backspace", "BackSpace"],
      space: ["space", " "],
      f1: ["f1", "F1"],
      f24: ["F24"],
    };
    for (const [canonical, spellings] of Object.entries(cases)) {
      for (const spelling of spellings) expect(normalizeKey(spelling), spelling).toBe(canonical);
    }
  });

  it("keeps single characters as themselves, with their case", () => {
    expect(normalizeKey("a")).toBe("a");
    expect(normalizeKey("A")).toBe("A");
    expect(normalizeKey("%")).toBe("%");
    expect(normalizeKey("é")).toBe("é");
    expect(normalizeKey("plus")).toBe("+");
  });

  it("reads ctrl+C as ctrl+c, but shift+A as written", () => {
    expect(normalizeCombo(["Ctrl", "C"])).toEqual(["ctrl", "c"]);
    expect(normalizeCombo(["shift", "A"])).toEqual(["shift", "A"]);
  });

  it("fails with invalid_params naming an unknown key", () => {
    const attempt = () => normalizeKey("hyperspace");
    expect(attempt).toThrow(CommandError);
    expect(attempt).toThrow("Unknown key: hyperspace");
    expect(() => normalizeCombo(["ctrl", "warp"])).toThrow("Unknown key in hotkey: warp");
    try {
      attempt();
    } catch (err) {
      expect((err as CommandError).code).toBe("invalid_params");
    }
  });

  it("has an X keysym for every canonical name and any character", () => {
    for (const name of NAMED_KEYS) expect(keysymOf(name), name).toBeGreaterThan(0);
    expect(keysymOf("enter")).toBe(0xff0d);
    expect(keysymOf("pagedown")).toBe(0xff56);
    expect(keysymOf("meta")).toBe(0xffeb);
    expect(keysymOf("f24")).toBe(0xffd5);
    expect(keysymOf("a")).toBe(0x61);
    expect(keysymOf("é")).toBe(0xe9);
    expect(keysymOf("日")).toBe(0x01000000 + 0x65e5);
    expect(keysymOf("😀")).toBe(0x01000000 + 0x1f600);
  });
});

describe("text to keysyms", () => {
  it("types line breaks as Enter and tabs as Tab, and skips what no key can type", () => {
    expect(textToKeysyms("a\r\nb\tc\u0007\ud800é😀")).toEqual([
      0x61, 0xff0d, 0x62, 0xff09, 0x63, 0xe9, 0x0101f600,
    ]);
  });
});
