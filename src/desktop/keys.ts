/**
 * Key names: the case-insensitive union of every name cua's servers and clients use (reference
 * §10), normalized to one canonical name each, and the X keysym of each canonical name.
 *
 * A key is either a named key (`enter`, `ctrl`, `f5`, `pagedown`, …), one character typed as
 * itself (`a`, `A`, `%`, `é`), or any keysym name X11 knows (`KP_Enter`, `XF86AudioMute`, also
 * without its `XF86` prefix: `audiomute`). `parseKeySequence` reads xdotool's syntax on top:
 * combinations joined by `+` (`ctrl+shift+t`) and sequences separated by spaces. Names are matched case-insensitively and with `_`, `-` and spaces
 * ignored, so `Page_Down`, `page down`, `PageDown` and `pgdn` are all `pagedown`. A single character
 * keeps its case (`A` is a capital A).
 *
 * @example
 * normalizeKey("Return")   // "enter"
 * normalizeKey("Command")  // "meta"
 * normalizeKey("%")        // "%"
 * keysymOf("pagedown")     // 0xff56 (Next)
 */
import { createRequire } from "node:module";
import { CommandError } from "../common/errors.js";
import { XF86_KEYSYMS } from "./xf86-keysyms.js";

/** Canonical named keys and their X keysyms (X11/keysymdef.h, XF86keysym.h). */
const NAMED_KEYSYMS = {
  enter: 0xff0d,
  escape: 0xff1b,
  tab: 0xff09,
  space: 0x0020,
  backspace: 0xff08,
  delete: 0xffff,
  insert: 0xff63,
  home: 0xff50,
  end: 0xff57,
  pageup: 0xff55,
  pagedown: 0xff56,
  left: 0xff51,
  up: 0xff52,
  right: 0xff53,
  down: 0xff54,
  shift: 0xffe1,
  shift_r: 0xffe2,
  ctrl: 0xffe3,
  ctrl_r: 0xffe4,
  alt: 0xffe9,
  alt_r: 0xffea,
  altgr: 0xfe03,
  /** The Windows / Super / Command key. */
  meta: 0xffeb,
  meta_r: 0xffec,
  caps_lock: 0xffe5,
  num_lock: 0xff7f,
  scroll_lock: 0xff14,
  print_screen: 0xff61,
  pause: 0xff13,
  menu: 0xff67,
  volume_mute: 0x1008ff12,
  volume_down: 0x1008ff11,
  volume_up: 0x1008ff13,
  media_play_pause: 0x1008ff14,
  media_stop: 0x1008ff15,
  media_previous: 0x1008ff16,
  media_next: 0x1008ff17,
  ...functionKeys(24),
} as const satisfies Record<string, number>;

export type NamedKey = keyof typeof NAMED_KEYSYMS;

/** Every canonical named key (single characters are keys too but are not listed). */
export const NAMED_KEYS = Object.keys(NAMED_KEYSYMS) as NamedKey[];

/** Canonical names of the modifier keys. */
export const MODIFIER_KEYS: readonly NamedKey[] = [
  "shift",
  "shift_r",
  "ctrl",
  "ctrl_r",
  "alt",
  "alt_r",
  "altgr",
  "meta",
  "meta_r",
];

/** Other spellings → canonical name. Keys are lowercase with `_`, `-` and spaces removed. */
const SPELLINGS: Record<string, NamedKey> = {
  // enter / escape / delete / backspace / insert
  return: "enter",
  ret: "enter",
  cr: "enter",
  esc: "escape",
  del: "delete",
  bsp: "backspace",
  back: "backspace",
  bs: "backspace",
  ins: "insert",
  // paging and arrows (xdotool's Prior/Next, browser's ArrowUp)
  pgup: "pageup",
  prior: "pageup",
  pgdn: "pagedown",
  pgdown: "pagedown",
  next: "pagedown",
  arrowleft: "left",
  arrowup: "up",
  arrowright: "right",
  arrowdown: "down",
  // modifiers
  shiftl: "shift",
  lshift: "shift",
  leftshift: "shift",
  shiftr: "shift_r",
  rshift: "shift_r",
  rightshift: "shift_r",
  control: "ctrl",
  ctl: "ctrl",
  ctrll: "ctrl",
  controll: "ctrl",
  lctrl: "ctrl",
  leftctrl: "ctrl",
  leftcontrol: "ctrl",
  ctrlr: "ctrl_r",
  controlr: "ctrl_r",
  rctrl: "ctrl_r",
  rightctrl: "ctrl_r",
  rightcontrol: "ctrl_r",
  option: "alt",
  opt: "alt",
  altl: "alt",
  lalt: "alt",
  leftalt: "alt",
  altr: "alt_r",
  ralt: "alt_r",
  rightalt: "alt_r",
  isolevel3shift: "altgr",
  win: "meta",
  windows: "meta",
  super: "meta",
  cmd: "meta",
  command: "meta",
  os: "meta",
  superl: "meta",
  metal: "meta",
  cmdl: "meta",
  winl: "meta",
  lwin: "meta",
  leftsuper: "meta",
  leftcmd: "meta",
  leftmeta: "meta",
  leftwin: "meta",
  superr: "meta_r",
  metar: "meta_r",
  cmdr: "meta_r",
  winr: "meta_r",
  rwin: "meta_r",
  rightsuper: "meta_r",
  rightcmd: "meta_r",
  rightmeta: "meta_r",
  rightwin: "meta_r",
  // locks and system keys
  capslock: "caps_lock",
  caps: "caps_lock",
  numlock: "num_lock",
  scrolllock: "scroll_lock",
  printscreen: "print_screen",
  print: "print_screen",
  prtsc: "print_screen",
  prtscr: "print_screen",
  prntscrn: "print_screen",
  snapshot: "print_screen",
  break: "pause",
  apps: "menu",
  contextmenu: "menu",
  application: "menu",
  // media (pynput's media_* names, browsers' Audio*/Media*)
  mediavolumemute: "volume_mute",
  audiovolumemute: "volume_mute",
  mute: "volume_mute",
  mediavolumedown: "volume_down",
  audiovolumedown: "volume_down",
  mediavolumeup: "volume_up",
  audiovolumeup: "volume_up",
  mediaplay: "media_play_pause",
  mediaplaypause: "media_play_pause",
  playpause: "media_play_pause",
  mediaprevious: "media_previous",
  mediaprev: "media_previous",
  mediaprevioustrack: "media_previous",
  medianext: "media_next",
  medianexttrack: "media_next",
  mediastop: "media_stop",
};

/** Canonical names looked up without their underscores (`pageup`, `capslock`, `shiftr`, …). */
const BY_SQUASHED_NAME = new Map<string, NamedKey>([
  ...NAMED_KEYS.map((name) => [squash(name), name] as [string, NamedKey]),
  ...Object.entries(SPELLINGS),
]);

/** Single characters that are better known by a name. */
const CHARACTER_NAMES: Record<string, string> = {
  " ": "space",
  "\n": "enter",
  "\r": "enter",
  "\t": "tab",
  "\b": "backspace",
  "\u001b": "escape",
  "\u007f": "delete",
  "⌘": "meta",
  "⌥": "alt",
  "⌃": "ctrl",
  "⇧": "shift",
};

/** Names of a few printable characters (xdotool and browsers use them). */
const CHARACTER_SPELLINGS: Record<string, string> = {
  plus: "+",
  minus: "-",
  equal: "=",
  equals: "=",
  comma: ",",
  period: ".",
  dot: ".",
  slash: "/",
  backslash: "\\",
  semicolon: ";",
  colon: ":",
  apostrophe: "'",
  quote: "'",
  quotedbl: '"',
  grave: "`",
  backtick: "`",
  asciitilde: "~",
  tilde: "~",
  bracketleft: "[",
  bracketright: "]",
  braceleft: "{",
  braceright: "}",
  parenleft: "(",
  parenright: ")",
  less: "<",
  greater: ">",
  underscore: "_",
  exclam: "!",
  at: "@",
  numbersign: "#",
  hash: "#",
  dollar: "$",
  percent: "%",
  asciicircum: "^",
  ampersand: "&",
  asterisk: "*",
  question: "?",
  bar: "|",
};

function functionKeys(count: number): Record<`f${number}`, number> {
  const keys: Record<string, number> = {};
  for (let n = 1; n <= count; n++) keys[`f${n}`] = 0xffbe + n - 1;
  return keys;
}

function squash(name: string): string {
  return name.toLowerCase().replace(/[_\-\s]/g, "");
}

/** The canonical name of a key, or `undefined` when it is not a key name or a single character. */
export function lookupKey(input: string): string | undefined {
  const chars = [...input];
  if (chars.length === 1) return own(CHARACTER_NAMES, input) ?? input;
  const squashed = squash(input.trim());
  if (squashed.length === 0) return undefined;
  if ([...squashed].length === 1 && input.trim().length === 1) return lookupKey(input.trim());
  return BY_SQUASHED_NAME.get(squashed) ?? own(CHARACTER_SPELLINGS, squashed) ?? xKeysym(input.trim())?.name;
}

interface XKeysym {
  name: string;
  code: number;
}
let xKeysyms: { exact: Map<string, XKeysym>; folded: Map<string, XKeysym> } | undefined;

/**
 * A keysym by its X11 name (keysymdef.h, as the x11 package ships it, and XF86keysym.h): the exact
 * name first, then ignoring case, then with `XF86` put in front. Loaded at the first name that is
 * not one of Hangar's own.
 */
function xKeysym(name: string): XKeysym | undefined {
  if (!xKeysyms) {
    const core = createRequire(import.meta.url)("x11/lib/keysyms.js") as Record<string, { code: number }>;
    const exact = new Map<string, XKeysym>();
    const folded = new Map<string, XKeysym>();
    const add = (keysym: XKeysym) => {
      exact.set(keysym.name, keysym);
      if (!folded.has(keysym.name.toLowerCase())) folded.set(keysym.name.toLowerCase(), keysym);
    };
    for (const [key, { code }] of Object.entries(core)) add({ name: key.replace(/^XK_/, ""), code });
    for (const [key, code] of Object.entries(XF86_KEYSYMS)) add({ name: key, code });
    xKeysyms = { exact, folded };
  }
  const lower = name.toLowerCase();
  return xKeysyms.exact.get(name) ?? xKeysyms.folded.get(lower) ?? xKeysyms.folded.get(`xf86${lower}`);
}

const KEY_SYNTAX =
  "keys are names (enter, esc, f5, pagedown, ctrl, …), X keysym names (KP_Enter, XF86AudioMute), single " +
  "characters, combinations joined by + (ctrl+shift+t) and sequences separated by spaces (ctrl+a BackSpace)";

/**
 * xdotool's key syntax: `ctrl+l`, `alt+F4`, `super+l`, `ctrl++` (ctrl and plus), and several of them
 * separated by spaces, pressed one after the other. A whole input that is one key name (`page down`,
 * ` `) is that key. Returns the combinations, each as canonical names.
 */
export function parseKeySequence(input: string): string[][] {
  const whole = lookupKey(input);
  if (whole !== undefined) return [[whole]];
  const tokens = input.trim().split(/\s+/).filter(Boolean);
  if (tokens.length === 0) throw new CommandError("invalid_params", `Unknown key: '${input}'; ${KEY_SYNTAX}`);
  return tokens.map((token) => {
    const parts =
      token.length > 1 && token.includes("+")
        ? token.endsWith("++")
          ? [...token.slice(0, -2).split("+"), "+"]
          : token.split("+")
        : [token];
    for (const part of parts) {
      if (part === "" || lookupKey(part) === undefined) {
        const shown = input.length > 60 ? `${input.slice(0, 60)}…` : input;
        const named = part === "" ? "an empty key" : `'${part.slice(0, 40)}'`;
        const where = part === input ? "" : ` in '${shown}'`;
        throw new CommandError("invalid_params", `Unknown key: ${named}${where}; ${KEY_SYNTAX}`);
      }
    }
    return normalizeCombo(parts);
  });
}

/** `table[key]` for the table's own entries only: `constructor` or `__proto__` are not keys. */
function own<T>(table: Record<string, T>, key: string): T | undefined {
  return Object.hasOwn(table, key) ? table[key] : undefined;
}

/**
 * The canonical name of a key; an unknown name is an `invalid_params` failure that names it.
 * @param what how the failure message calls the key (`key`, `key in hotkey`)
 */
export function normalizeKey(input: string, what = "key"): string {
  const name = lookupKey(input);
  if (name === undefined) {
    const shown = input.length > 40 ? `${input.slice(0, 40)}…` : input;
    throw new CommandError("invalid_params", `Unknown ${what}: ${shown}`);
  }
  return name;
}

/**
 * The canonical names of a key combination (`["ctrl", "C"]` → `["ctrl", "c"]`). When the combination
 * holds a modifier other than Shift, a capital ASCII letter means the letter key, not Shift+letter,
 * since that is what `ctrl+C` means to a person.
 */
export function normalizeCombo(keys: readonly string[]): string[] {
  const names = keys.map((k) => normalizeKey(k, "key in hotkey"));
  const modified = names.some((n) => isModifier(n) && n !== "shift" && n !== "shift_r");
  return modified ? names.map((n) => (/^[A-Z]$/.test(n) ? n.toLowerCase() : n)) : names;
}

export function isNamedKey(name: string): name is NamedKey {
  return Object.hasOwn(NAMED_KEYSYMS, name);
}

export function isModifier(name: string): boolean {
  return (MODIFIER_KEYS as readonly string[]).includes(name);
}

/** The X keysym of a canonical key name or of any single character. */
export function keysymOf(name: string): number {
  if (isNamedKey(name)) return NAMED_KEYSYMS[name];
  const cp = name.codePointAt(0);
  if (cp === undefined || [...name].length !== 1) {
    const x = xKeysym(name);
    if (x?.name === name) return x.code;
    throw new CommandError("invalid_params", `Unknown key: ${name}`);
  }
  return keysymOfCharacter(cp);
}

/** Latin-1 characters are their own keysym; every other code point is `0x01000000 + cp`. */
export function keysymOfCharacter(codePoint: number): number {
  if ((codePoint >= 0x20 && codePoint <= 0x7e) || (codePoint >= 0xa0 && codePoint <= 0xff)) return codePoint;
  const named = own(CHARACTER_NAMES, String.fromCodePoint(codePoint));
  if (named && isNamedKey(named)) return NAMED_KEYSYMS[named];
  return 0x01000000 + codePoint;
}
