/**
 * Keys for the page: the desktop's key syntax (`ctrl+a`, `Return`, `ctrl+shift+t Tab`; see
 * `src/desktop/keys.ts`) as the key names Playwright's keyboard takes (`Control+a`, `Enter`). One
 * syntax for the desktop and the browser, so an agent writes keys the same way for both.
 */
import { CommandError } from "../common/errors.js";
import { parseKeySequence } from "../desktop/keys.js";

/** Hangar's canonical named keys → Playwright's (its US layout's key or code names). */
const PLAYWRIGHT_KEYS: Record<string, string> = {
  enter: "Enter",
  escape: "Escape",
  tab: "Tab",
  space: "Space",
  backspace: "Backspace",
  delete: "Delete",
  insert: "Insert",
  home: "Home",
  end: "End",
  pageup: "PageUp",
  pagedown: "PageDown",
  left: "ArrowLeft",
  up: "ArrowUp",
  right: "ArrowRight",
  down: "ArrowDown",
  shift: "Shift",
  shift_r: "ShiftRight",
  ctrl: "Control",
  ctrl_r: "ControlRight",
  alt: "Alt",
  alt_r: "AltRight",
  altgr: "AltGraph",
  meta: "Meta",
  meta_r: "MetaRight",
  caps_lock: "CapsLock",
  num_lock: "NumLock",
  scroll_lock: "ScrollLock",
  print_screen: "PrintScreen",
  pause: "Pause",
  menu: "ContextMenu",
  volume_mute: "AudioVolumeMute",
  volume_down: "AudioVolumeDown",
  volume_up: "AudioVolumeUp",
  media_play_pause: "MediaPlayPause",
  media_previous: "MediaTrackPrevious",
  media_next: "MediaTrackNext",
  ...Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`f${i + 1}`, `F${i + 1}`])),
};

/**
 * The chords of a key text, each as Playwright's `keyboard.press` takes it (`Control+Shift+t`),
 * pressed one after the other. A key the page's keyboard does not have is `invalid_params`.
 */
export function pageChords(keys: string): string[] {
  return parseKeySequence(keys).map((chord) => chord.map(pageKey).join("+"));
}

/** The keys of one chord (`ctrl+shift`), as Playwright names them, to hold down. */
export function pageKeysOfChord(keys: string): string[] {
  const chords = parseKeySequence(keys);
  if (chords.length !== 1) {
    throw new CommandError(
      "invalid_params",
      `Invalid params: give one key or chord to hold, not ${chords.length}`,
    );
  }
  return chords[0].map(pageKey);
}

function pageKey(name: string): string {
  if ([...name].length === 1) return name;
  const key = Object.hasOwn(PLAYWRIGHT_KEYS, name) ? PLAYWRIGHT_KEYS[name] : undefined;
  if (key === undefined) {
    throw new CommandError(
      "invalid_params",
      `Invalid params: the page's keyboard has no key ${JSON.stringify(name)}`,
    );
  }
  return key;
}
