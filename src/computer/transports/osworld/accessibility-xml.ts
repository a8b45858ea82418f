/**
 * Hangar's accessibility tree (`get_accessibility_tree` with `details`) written as OSWorld's XML:
 * the `desktop-frame` root with upstream's eight namespaces, one element per accessible named by its
 * role (spaces → `-`), `name`, `st:<state>` (underscores), `attr:<key>`, `cp:screencoord` and
 * `cp:size` as Python tuples for visible and showing elements, `image`/`selection`, `val:*`,
 * `act:<action>_desc`/`_kb`, and the element's text as its content. No declaration, no indentation.
 */

const NS_BASE = "https://accessibility.ubuntu.example.org/ns";
export const OSWORLD_NAMESPACES = {
  st: `${NS_BASE}/state`,
  attr: `${NS_BASE}/attributes`,
  cp: `${NS_BASE}/component`,
  doc: `${NS_BASE}/document`,
  docattr: `${NS_BASE}/document/attributes`,
  txt: `${NS_BASE}/text`,
  val: `${NS_BASE}/value`,
  act: `${NS_BASE}/action`,
} as const;

/** The fields of a tree node this module reads (the command's result, as JSON). */
export interface TreeNode {
  role: string;
  name: string;
  states: string[];
  bounds: { x: number; y: number; width: number; height: number } | null;
  text?: string;
  value?: number;
  source?: string;
  details?: {
    attributes: Record<string, string>;
    interfaces: string[];
    actions: { name: string; description: string; keybinding: string }[];
    range?: { min: number; max: number; step: number };
  };
  children?: TreeNode[];
}

/** Upstream's limits: 50 levels, 1024 children a node. */
export const MAX_DEPTH = 50;
const MAX_WIDTH = 1024;

const ROOT_OPEN = `<desktop-frame ${Object.entries(OSWORLD_NAMESPACES)
  .map(([prefix, uri]) => `xmlns:${prefix}="${uri}"`)
  .join(" ")}>`;

/** The desktop's tree as OSWorld's XML; windows known only from the window manager are left out. */
export function accessibilityXml(desktop: TreeNode): string {
  const parts = [ROOT_OPEN];
  for (const app of (desktop.children ?? []).slice(0, MAX_WIDTH)) {
    if (app.source !== "x11") writeNode(app, 1, parts);
  }
  parts.push("</desktop-frame>");
  return parts.join("");
}

function writeNode(node: TreeNode, depth: number, out: string[]) {
  const tag = elementName(node.role);
  const attrs: [string, string][] = [["name", node.name]];
  for (const state of node.states) attrs.push([`st:${xmlName(state.replaceAll("-", "_"))}`, "true"]);
  const details = node.details;
  for (const [key, value] of Object.entries(details?.attributes ?? {})) {
    if (key) attrs.push([`attr:${xmlName(key)}`, value]);
  }
  const interfaces = new Set(details?.interfaces ?? []);
  const shown = node.states.includes("visible") && node.states.includes("showing");
  if (shown && node.bounds && interfaces.has("Component")) {
    attrs.push(["cp:screencoord", `(${node.bounds.x}, ${node.bounds.y})`]);
    attrs.push(["cp:size", `(${node.bounds.width}, ${node.bounds.height})`]);
  }
  if (interfaces.has("Image")) attrs.push(["image", "true"]);
  if (interfaces.has("Selection")) attrs.push(["selection", "true"]);
  if (interfaces.has("Value") && node.value !== undefined) {
    attrs.push(["val:value", pythonFloat(node.value)]);
    if (details?.range) {
      attrs.push(["val:min", pythonFloat(details.range.min)]);
      attrs.push(["val:max", pythonFloat(details.range.max)]);
      attrs.push(["val:step", pythonFloat(details.range.step)]);
    }
  }
  for (const action of details?.actions ?? []) {
    const name = xmlName(action.name.replaceAll(" ", "-"));
    attrs.push([`act:${name}_desc`, action.description]);
    attrs.push([`act:${name}_kb`, action.keybinding]);
  }
  const seen = new Set<string>();
  const written = attrs
    .filter(([key]) => !seen.has(key) && seen.add(key))
    .map(([key, value]) => ` ${key}="${escapeXml(value, true)}"`)
    .join("");
  const text = node.text ? node.text.replace(/[\uFFFC\uFFFD]/g, "") : "";
  const children = depth < MAX_DEPTH ? (node.children ?? []).slice(0, MAX_WIDTH) : [];
  if (!text && children.length === 0) {
    out.push(`<${tag}${written}/>`);
    return;
  }
  out.push(`<${tag}${written}>`, escapeXml(text, false));
  for (const child of children) writeNode(child, depth + 1, out);
  out.push(`</${tag}>`);
}

/** A role as an element name: `push button` → `push-button`; empty → `unknown`. */
export function elementName(role: string): string {
  const name = role.trim().replaceAll(" ", "-");
  return name ? xmlName(name) : "unknown";
}

/** Characters that cannot be in an XML name become `_` (and a name cannot start with a digit or `-`). */
function xmlName(name: string): string {
  const cleaned = name.replace(/[^A-Za-z0-9_.\-\u00B7\u00C0-\uFFFD]/g, "_");
  return /^[A-Za-z_\u00C0-\uFFFD]/.test(cleaned) ? cleaned : `_${cleaned}`;
}

/** Escapes markup and drops the characters XML 1.0 cannot hold (control characters, lone surrogates). */
function escapeXml(value: string, attribute: boolean): string {
  const clean = xmlCharacters(value);
  const escaped = clean.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  return attribute
    ? escaped.replace(/"/g, "&quot;").replace(/\n/g, "&#10;").replace(/\r/g, "&#13;").replace(/\t/g, "&#9;")
    : escaped.replace(/\r/g, "&#13;");
}

/** Only the characters XML 1.0 allows: tab, newlines, and from space up, without lone surrogates. */
function xmlCharacters(value: string): string {
  let out = "";
  for (const ch of value) {
    const code = ch.codePointAt(0) ?? 0;
    const allowed =
      code === 0x9 ||
      code === 0xa ||
      code === 0xd ||
      (code >= 0x20 && code <= 0xd7ff) ||
      (code >= 0xe000 && code <= 0xfffd) ||
      code >= 0x10000;
    if (allowed) out += ch;
  }
  return out;
}

/** `str(float(x))` as Python writes it for ordinary values: `0.0`, `50.0`, `0.5`. */
function pythonFloat(value: number): string {
  if (Number.isInteger(value) && Math.abs(value) < 1e16) return `${value}.0`;
  return String(value);
}
