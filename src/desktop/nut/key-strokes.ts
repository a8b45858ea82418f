/**
 * How the nut-js backend presses keys: canonical key names (keys.ts) → nut-js `Key` values, and
 * printable ASCII → the key of a US layout plus Shift where needed. nut-js's own `type()` presses
 * `!` as `1` and drops anything outside ASCII, so text goes through these strokes instead, and
 * characters without a key here are pasted (see paste.ts).
 */
import { Key } from "@nut-tree-fork/shared/dist/lib/enums/key.enum.js";
import { CommandError } from "../../common/errors.js";
import type { NamedKey } from "../keys.js";
import type { KeyStroke } from "./protocol.js";

/** nut-js has no key for `pause` and `altgr`'s nearest is the right Alt. */
const NAMED: Partial<Record<NamedKey, Key>> = {
  enter: Key.Enter,
  escape: Key.Escape,
  tab: Key.Tab,
  space: Key.Space,
  backspace: Key.Backspace,
  delete: Key.Delete,
  insert: Key.Insert,
  home: Key.Home,
  end: Key.End,
  pageup: Key.PageUp,
  pagedown: Key.PageDown,
  left: Key.Left,
  up: Key.Up,
  right: Key.Right,
  down: Key.Down,
  shift: Key.LeftShift,
  shift_r: Key.RightShift,
  ctrl: Key.LeftControl,
  ctrl_r: Key.RightControl,
  alt: Key.LeftAlt,
  alt_r: Key.RightAlt,
  altgr: Key.RightAlt,
  meta: Key.LeftSuper,
  meta_r: Key.RightSuper,
  caps_lock: Key.CapsLock,
  num_lock: Key.NumLock,
  scroll_lock: Key.ScrollLock,
  print_screen: Key.Print,
  menu: Key.Menu,
  volume_mute: Key.AudioMute,
  volume_down: Key.AudioVolDown,
  volume_up: Key.AudioVolUp,
  media_play_pause: Key.AudioPlay,
  media_stop: Key.AudioStop,
  media_previous: Key.AudioPrev,
  media_next: Key.AudioNext,
};
for (let n = 1; n <= 24; n++) NAMED[`f${n}` as NamedKey] = Key[`F${n}` as keyof typeof Key];

const UNSHIFTED_SYMBOLS: Record<string, Key> = {
  "`": Key.Grave,
  "-": Key.Minus,
  "=": Key.Equal,
  "[": Key.LeftBracket,
  "]": Key.RightBracket,
  "\\": Key.Backslash,
  ";": Key.Semicolon,
  "'": Key.Quote,
  ",": Key.Comma,
  ".": Key.Period,
  "/": Key.Slash,
  " ": Key.Space,
  "\n": Key.Enter,
  "\t": Key.Tab,
};
/** Shifted symbol → the unshifted character on the same US key. */
const SHIFTED_SYMBOLS: Record<string, string> = {
  "~": "`",
  "!": "1",
  "@": "2",
  "#": "3",
  $: "4",
  "%": "5",
  "^": "6",
  "&": "7",
  "*": "8",
  "(": "9",
  ")": "0",
  _: "-",
  "+": "=",
  "{": "[",
  "}": "]",
  "|": "\\",
  ":": ";",
  '"': "'",
  "<": ",",
  ">": ".",
  "?": "/",
};

/** The key that types `char` on a US layout, and whether Shift is needed; undefined if none. */
export function keyForCharacter(char: string): { key: Key; shift: boolean } | undefined {
  if (/^[a-z]$/.test(char)) return { key: Key[char.toUpperCase() as keyof typeof Key], shift: false };
  if (/^[A-Z]$/.test(char)) return { key: Key[char as keyof typeof Key], shift: true };
  if (/^[0-9]$/.test(char)) return { key: Key[`Num${char}` as keyof typeof Key], shift: false };
  if (Object.hasOwn(UNSHIFTED_SYMBOLS, char)) return { key: UNSHIFTED_SYMBOLS[char], shift: false };
  const base = SHIFTED_SYMBOLS[char];
  if (base !== undefined) return { key: keyForCharacter(base)!.key, shift: true };
  return undefined;
}

/** The nut-js key of a canonical named key, or undefined for a character. */
export function keyForName(name: string): Key | undefined {
  return NAMED[name as NamedKey];
}

/**
 * Strokes that press (`down`) or release (`up`) one canonical key. A character that needs Shift
 * holds Shift around it: down is Shift↓ key↓, up is key↑ Shift↑. Undefined when the key is a
 * character no key types (it has to be pasted); a named key nut-js lacks is `not_supported`.
 */
export function strokesForKey(name: string, action: "down" | "up"): KeyStroke[] | undefined {
  const named = keyForName(name);
  if (named !== undefined) return [[named, action]];
  if ([...name].length !== 1)
    throw new CommandError("not_supported", `The nut-js backend cannot press ${name}`);
  const typed = keyForCharacter(name);
  if (!typed) return undefined;
  if (!typed.shift) return [[typed.key, action]];
  return action === "down"
    ? [
        [Key.LeftShift, "down"],
        [typed.key, "down"],
      ]
    : [
        [typed.key, "up"],
        [Key.LeftShift, "up"],
      ];
}

/** Strokes that type `text`, or undefined when some character has no key (the text is pasted). */
export function strokesForText(text: string): KeyStroke[] | undefined {
  const strokes: KeyStroke[] = [];
  for (const char of text.replace(/\r\n?/g, "\n")) {
    const down = strokesForKey(char, "down");
    if (!down) return undefined;
    strokes.push(...down, ...strokesForKey(char, "up")!);
  }
  return strokes;
}

/** The strokes of a key combination: each key down in order, then up in reverse. */
export function strokesForCombo(keys: readonly Key[]): KeyStroke[] {
  return [...keys.map((k) => [k, "down"] as const), ...[...keys].reverse().map((k) => [k, "up"] as const)];
}
