/** AT-SPI state and interface names (the numbering of `AtspiStateType`). */

const STATE_NAMES = [
  "invalid",
  "active",
  "armed",
  "busy",
  "checked",
  "collapsed",
  "defunct",
  "editable",
  "enabled",
  "expandable",
  "expanded",
  "focusable",
  "focused",
  "has-tooltip",
  "horizontal",
  "iconified",
  "modal",
  "multi-line",
  "multiselectable",
  "opaque",
  "pressed",
  "resizable",
  "selectable",
  "selected",
  "sensitive",
  "showing",
  "single-line",
  "stale",
  "transient",
  "vertical",
  "visible",
  "manages-descendants",
  "indeterminate",
  "required",
  "truncated",
  "animated",
  "invalid-entry",
  "supports-autocompletion",
  "selectable-text",
  "is-default",
  "visited",
  "checkable",
  "has-popup",
  "read-only",
] as const;

/** `GetState` answers two 32-bit words of bits; this turns them into names. */
export function decodeStates(words: readonly number[]): string[] {
  const names: string[] = [];
  for (let bit = 0; bit < STATE_NAMES.length; bit++) {
    const word = words[bit >> 5] ?? 0;
    if ((word >>> (bit & 31)) & 1) names.push(STATE_NAMES[bit]);
  }
  return names;
}

/** The two 32-bit words of a state set holding the named states (as `GetState` answers). */
export function encodeStates(names: readonly (typeof STATE_NAMES)[number][]): [number, number] {
  const words: [number, number] = [0, 0];
  for (const name of names) {
    const bit = STATE_NAMES.indexOf(name);
    words[bit >> 5] |= 1 << (bit & 31);
  }
  return words;
}

export const IFACE = {
  accessible: "org.a11y.atspi.Accessible",
  component: "org.a11y.atspi.Component",
  text: "org.a11y.atspi.Text",
  editableText: "org.a11y.atspi.EditableText",
  action: "org.a11y.atspi.Action",
  value: "org.a11y.atspi.Value",
  collection: "org.a11y.atspi.Collection",
  properties: "org.freedesktop.DBus.Properties",
} as const;

/** The desktop: the registry's root, whose children are the applications. */
export const REGISTRY_ROOT = { bus: "org.a11y.atspi.Registry", path: "/org/a11y/atspi/accessible/root" };

/** `GetExtents` coordinate type: 0 = screen. */
export const SCREEN_COORDS = 0;
