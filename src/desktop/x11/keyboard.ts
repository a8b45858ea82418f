/**
 * Keyboard input through XTEST with the server's own keymap: a keysym is found on its keycode and
 * level, and Shift / AltGr (ISO_Level3_Shift) are pressed around it as that level needs.
 *
 * A character that is on no key of the layout (accents on a US layout, CJK, emoji) gets a spare
 * keycode, one that the keymap leaves empty, remapped to its keysym with `ChangeKeyboardMapping`.
 * The spare keycodes keep their assignment afterwards, so repeated characters cost nothing, and a
 * keycode is only remapped again once the clients have had time to read the events that used it;
 * reusing a keycode right away is what makes `xdotool type` drop characters.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { CommandError } from "../../common/errors.js";
import { keysymOf, keysymOfCharacter } from "../keys.js";
import type { XConnection, XExtension } from "./connection.js";

/** Characters sent to the X server between two looks at the cancellation signal. */
const TYPING_STEP = 64;
const KEY_PRESS = 2;
const KEY_RELEASE = 3;
const SHIFT_L = 0xffe1;
const ISO_LEVEL3_SHIFT = 0xfe03;
const MODE_SWITCH = 0xff7e;
/** The keypad keysyms, KP_Space to KP_Equal (keysymdef.h). */
const KEYPAD_FIRST = 0xff80;
const KEYPAD_LAST = 0xffbd;
/** Core keymap columns of group 1: level 1, 2 (Shift), 3 (AltGr), 4 (Shift+AltGr). */
const LEVEL_COLUMNS = [0, 1, 4, 5] as const;
/**
 * How long a remapped keycode stays reserved for the character it was last used for: clients
 * reload the keymap once per remapped keycode (GTK takes 10–25 ms each on a busy machine) before
 * they read the key events that follow, so the guard grows with the size of the last remap.
 */
const REUSE_GUARD_MS = 150;
const REUSE_GUARD_PER_REMAP_MS = 40;

interface KeyPlace {
  keycode: number;
  level: number;
}

interface SpareKey {
  keycode: number;
  keysym: number;
  lastUsed: number;
}

export class Keyboard {
  private places = new Map<number, KeyPlace>();
  private spares: SpareKey[] = [];
  private stale = false;
  /** How many keycodes the last remap changed. */
  private lastRemapSize = 0;
  /** Keycodes this backend holds down, with the modifiers it pressed for each. */
  private readonly held = new Map<string, number[]>();

  private constructor(
    private readonly conn: XConnection,
    private readonly xtest: XExtension,
  ) {
    conn.X.on("event", (ev: { name?: string; request?: number }) => {
      if (ev.name === "MappingNotify" && ev.request === 1) this.stale = true;
    });
  }

  static async create(conn: XConnection, xtest: XExtension): Promise<Keyboard> {
    const keyboard = new Keyboard(conn, xtest);
    await keyboard.loadKeymap();
    return keyboard;
  }

  /** Presses or releases the key of a canonical key name (see keys.ts). */
  async key(name: string, action: "down" | "up"): Promise<void> {
    await this.refresh();
    if (action === "down") {
      const keysym = keysymOf(name);
      const [place] = await this.placesFor([keysym]);
      const modifiers = this.modifierKeycodes(place.level).filter((kc) => !this.isHeld(kc));
      for (const kc of modifiers) this.fake(KEY_PRESS, kc);
      this.fake(KEY_PRESS, place.keycode);
      this.held.set(name, [place.keycode, ...modifiers]);
    } else {
      const keysym = keysymOf(name);
      const pressed = this.held.get(name);
      const keycodes = pressed ?? [(await this.placesFor([keysym]))[0].keycode];
      this.held.delete(name);
      const [keycode, ...modifiers] = keycodes;
      this.fake(KEY_RELEASE, keycode);
      for (const kc of modifiers.reverse()) this.fake(KEY_RELEASE, kc);
      // A spare keycode just released is not remapped before clients have read its events.
      this.touchSpares([keysym]);
    }
    await this.conn.sync();
  }

  /** Types text exactly, character by character (`\n` is Enter and `\t` Tab). */
  /** Types in steps of at most `TYPING_STEP` characters; an aborted `signal` stops it between steps. */
  async typeText(text: string, signal?: AbortSignal): Promise<void> {
    await this.refresh();
    const keysyms = textToKeysyms(text);
    let start = 0;
    while (start < keysyms.length) {
      signal?.throwIfAborted();
      const end = Math.min(this.chunkEnd(keysyms, start), start + TYPING_STEP);
      const chunk = keysyms.slice(start, end);
      const places = await this.placesFor(chunk, signal);
      let level = 0;
      for (const place of places) {
        if (place.level !== level) {
          this.setLevel(level, place.level);
          level = place.level;
        }
        this.fake(KEY_PRESS, place.keycode);
        this.fake(KEY_RELEASE, place.keycode);
      }
      this.setLevel(level, 0);
      await this.conn.sync();
      this.touchSpares(chunk);
      start = end;
    }
  }

  /** Gives the spare keycodes back to the keymap (empty again). */
  restore() {
    if (!this.conn.alive) return;
    for (const spare of this.spares) {
      if (spare.keysym !== 0) this.conn.X.ChangeKeyboardMapping(spare.keycode, 2, [0, 0]);
    }
  }

  private async refresh() {
    if (this.stale) await this.loadKeymap();
  }

  private async loadKeymap() {
    this.stale = false;
    const { min_keycode: min, max_keycode: max } = this.conn.info;
    const rows = await this.conn.call<number[][]>((cb) =>
      this.conn.X.GetKeyboardMapping(min, max - min + 1, cb),
    );
    const assigned = new Map(this.spares.map((s) => [s.keycode, s]));
    const places = new Map<number, KeyPlace>();
    const spares: SpareKey[] = [];
    rows.forEach((row, index) => {
      const keycode = min + index;
      const mine = assigned.get(keycode);
      if (mine && row[0] === mine.keysym && (row[1] ?? mine.keysym) === mine.keysym) {
        spares.push(mine);
        return;
      }
      if (row.every((sym) => sym === 0)) {
        spares.push({ keycode, keysym: 0, lastUsed: 0 });
        return;
      }
      LEVEL_COLUMNS.forEach((column, level) => {
        const sym = row[column] ?? 0;
        if (sym === 0) return;
        const known = places.get(sym);
        if (!known || level < known.level) places.set(sym, { keycode, level });
      });
    });
    this.places = places;
    // Keycode 8 is the lowest and some clients ignore it: use it last.
    this.spares = spares.sort((a, b) => (a.keycode === 8 ? 1 : b.keycode === 8 ? -1 : a.keycode - b.keycode));
  }

  /** Where each keysym is typed from, remapping spare keycodes for the ones on no key. */
  private async placesFor(keysyms: readonly number[], signal?: AbortSignal): Promise<KeyPlace[]> {
    const missing = new Set<number>();
    for (const sym of keysyms) {
      if (!this.usablePlace(sym) && !this.spares.some((s) => s.keysym === sym)) missing.add(sym);
    }
    if (missing.size > 0) await this.assignSpares([...missing], new Set(keysyms), signal);
    return keysyms.map((sym) => {
      const place = this.usablePlace(sym);
      if (place) return place;
      const spare = this.spares.find((s) => s.keysym === sym);
      if (!spare) throw new CommandError("failed", `No keycode is free to type keysym 0x${sym.toString(16)}`);
      return { keycode: spare.keycode, level: 0 };
    });
  }

  private async assignSpares(keysyms: number[], keep: Set<number>, signal?: AbortSignal) {
    const free = this.unheldSpares()
      .filter((s) => !keep.has(s.keysym))
      .sort((a, b) => a.lastUsed - b.lastUsed);
    if (free.length < keysyms.length) {
      throw new CommandError("failed", "The keymap has no spare keycodes left to type these characters");
    }
    const chosen = free.slice(0, keysyms.length);
    const newestUse = Math.max(...chosen.map((s) => s.lastUsed));
    const guard = REUSE_GUARD_MS + REUSE_GUARD_PER_REMAP_MS * this.lastRemapSize;
    const wait = newestUse + guard - performance.now();
    if (wait > 0) await sleep(wait, undefined, { signal });
    this.lastRemapSize = chosen.length;
    chosen.forEach((spare, i) => {
      spare.keysym = keysyms[i];
      this.conn.X.ChangeKeyboardMapping(spare.keycode, 2, [keysyms[i], keysyms[i]]);
    });
    // Our own MappingNotify comes back to us; the assignment already matches it.
    await this.conn.sync();
    this.stale = false;
  }

  /**
   * The spare keycodes that may be remapped: a key held down keeps its keycode until it is
   * released (remapped, its release would be another key's).
   */
  private unheldSpares(): SpareKey[] {
    const held = new Set([...this.held.values()].map(([keycode]) => keycode));
    return this.spares.filter((s) => !held.has(s.keycode));
  }

  /** The end of a run of keysyms that needs no more spare keycodes than there are to remap. */
  private chunkEnd(keysyms: readonly number[], start: number): number {
    const available = this.unheldSpares().length;
    const needed = new Set<number>();
    for (let i = start; i < keysyms.length; i++) {
      const sym = keysyms[i];
      if (this.usablePlace(sym)) continue;
      needed.add(sym);
      if (needed.size > available) return Math.max(i, start + 1);
    }
    return keysyms.length;
  }

  /**
   * Where a keysym is on the keymap, when pressing it there gives that keysym: its level needs
   * AltGr only where the keymap has one, and a keypad keysym must be on the first level (`KP_0` is
   * the second level of the `KP_Insert` key, which NumLock selects, not Shift: Shift with that key
   * is Shift+KP_Insert), else it gets a spare keycode of its own.
   */
  private usablePlace(keysym: number): KeyPlace | undefined {
    const place = this.places.get(keysym);
    if (!place) return undefined;
    if (place.level >= 2 && this.levelThreeKeycode() === undefined) return undefined;
    if (place.level > 0 && keysym >= KEYPAD_FIRST && keysym <= KEYPAD_LAST) return undefined;
    return place;
  }

  private touchSpares(keysyms: readonly number[]) {
    const used = new Set(keysyms);
    const now = performance.now();
    for (const spare of this.spares) if (used.has(spare.keysym)) spare.lastUsed = now;
  }

  private modifierKeycodes(level: number): number[] {
    const keycodes: number[] = [];
    if (level === 1 || level === 3) keycodes.push(this.requirePlace(SHIFT_L, "Shift"));
    if (level >= 2) keycodes.push(this.requirePlace(this.levelThreeKeysym() ?? ISO_LEVEL3_SHIFT, "AltGr"));
    return keycodes;
  }

  private setLevel(from: number, to: number) {
    const before = this.modifierKeycodes(from);
    const after = this.modifierKeycodes(to);
    for (const kc of before) if (!after.includes(kc)) this.fake(KEY_RELEASE, kc);
    for (const kc of after) if (!before.includes(kc)) this.fake(KEY_PRESS, kc);
  }

  private levelThreeKeysym(): number | undefined {
    if (this.places.get(ISO_LEVEL3_SHIFT)?.level === 0) return ISO_LEVEL3_SHIFT;
    if (this.places.get(MODE_SWITCH)?.level === 0) return MODE_SWITCH;
    return undefined;
  }

  private levelThreeKeycode(): number | undefined {
    const sym = this.levelThreeKeysym();
    return sym === undefined ? undefined : this.places.get(sym)?.keycode;
  }

  private requirePlace(keysym: number, name: string): number {
    const place = this.places.get(keysym);
    if (!place) throw new CommandError("failed", `The keymap has no ${name} key`);
    return place.keycode;
  }

  private isHeld(keycode: number): boolean {
    for (const keycodes of this.held.values()) if (keycodes.includes(keycode)) return true;
    return false;
  }

  private fake(type: number, keycode: number) {
    this.conn.ensureAlive();
    this.xtest.FakeInput(type, keycode, 0, 0, 0, 0);
  }
}

/**
 * The keysyms that type a text: one per code point; line breaks are Enter, tabs are Tab, other
 * control characters are skipped.
 */
export function textToKeysyms(text: string): number[] {
  const keysyms: number[] = [];
  const normalized = text.replace(/\r\n?/g, "\n");
  for (const char of normalized) {
    const cp = char.codePointAt(0) as number;
    if (char === "\n") keysyms.push(0xff0d);
    else if (char === "\t") keysyms.push(0xff09);
    // Control characters and lone UTF-16 surrogates have no key to type.
    else if (cp < 0x20 || cp === 0x7f || (cp >= 0xd800 && cp <= 0xdfff)) continue;
    else keysyms.push(keysymOfCharacter(cp));
  }
  return keysyms;
}
