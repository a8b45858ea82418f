/**
 * The accessibility side of a desktop: a tree of the running applications' user-interface elements
 * and the few actions an agent needs on them. Implemented on Linux by AT-SPI (`atspi/`); command
 * handlers talk to this interface only.
 */
import { CommandError } from "../common/errors.js";
import type { Rect } from "./backend.js";

export interface AccessibleNode {
  /** Refers to this element in later calls (`click_element`, `set_element_text`). */
  id: string;
  role: string;
  name: string;
  description?: string;
  /** e.g. `enabled`, `focusable`, `focused`, `showing`, `visible`, `editable`, `checked`. */
  states: string[];
  /** Screen pixels; null when the element has no on-screen extent. */
  bounds: Rect | null;
  /** Text content when the element holds text other than its name (entries, text views). */
  text?: string;
  /** Current value of a range element (slider, progress bar, spin button). */
  value?: number;
  /** Names of the actions the element offers (e.g. `click`). */
  actions?: string[];
  /** With `TreeOptions.details`: what OSWorld's accessibility XML shows besides the above. */
  details?: NodeDetails;
  /** `x11` for a window known only from the window manager (its application is not on the bus). */
  source?: "x11";
  /** The owning process and application of an `x11` window. */
  pid?: number;
  app?: string;
  children?: AccessibleNode[];
}

export interface NodeDetails {
  /** The toolkit's object attributes (`toolkit`, `id`, `class`, `tag`, …). */
  attributes: Record<string, string>;
  /** The AT-SPI interfaces it implements, short names (`Component`, `Text`, `Image`, `Selection`, …). */
  interfaces: string[];
  /** Each action's name, description and key binding. */
  actions: { name: string; description: string; keybinding: string }[];
  /** A range element's bounds and step. */
  range?: { min: number; max: number; step: number };
}

export interface TreeOptions {
  /** Only applications whose name contains this (case-insensitive). */
  app?: string;
  /** Only top-level windows whose name contains this (case-insensitive). */
  window?: string;
  /** Levels below the desktop (applications are level 1, their windows level 2). */
  maxDepth: number;
  /** The walk stops after this many elements and says so. */
  maxNodes: number;
  /** Read `details` too (object attributes, interfaces, action descriptions, value range), and whole texts. */
  details?: boolean;
}

export interface AccessibleTree {
  tree: AccessibleNode;
  nodeCount: number;
  /** True when `maxNodes` cut the walk short (deeper levels cut by `maxDepth` are not counted). */
  truncated: boolean;
}

export interface AccessibilityBackend {
  tree(options: TreeOptions): Promise<AccessibleTree>;
  /** One element, without its children; `not_found` when the id no longer refers to anything. */
  element(id: string): Promise<AccessibleNode>;
  /** Performs the element's click-like action; the name of the action done, or null if it has none. */
  activate(id: string): Promise<string | null>;
  /** Optional: the element that has the keyboard focus, or null when none is known. */
  focused?(): Promise<AccessibleNode | null>;
  /** Gives the element the keyboard focus; false when it cannot take it that way. */
  focus(id: string): Promise<boolean>;
  /** Replaces an editable element's text and returns the text read back. */
  setText(id: string, text: string): Promise<string>;
}

/** Hands out the accessibility backend, connecting or reconnecting as needed. */
export type AccessibilityProvider = () => Promise<AccessibilityBackend>;

export const noAccessibility: AccessibilityProvider = async () => {
  throw new CommandError("unavailable", "Accessibility is not available on this platform");
};

export interface ElementQuery {
  role?: string;
  /** Name (title) of the element. */
  name?: string;
  /** Text or value of the element. */
  value?: string;
}

/**
 * Elements of a tree that match every given field, best first: names that match exactly before names
 * that only contain the wanted text, then tree order. Roles match ignoring case, and a short role
 * matches a longer one that ends with it (`button` finds `push button` and `toggle button`).
 */
export function findElements(tree: AccessibleNode, query: ElementQuery): AccessibleNode[] {
  const role = query.role?.toLowerCase().replaceAll("_", " ").trim();
  const name = query.name?.toLowerCase();
  const value = query.value?.toLowerCase();
  const exact: AccessibleNode[] = [];
  const partial: AccessibleNode[] = [];
  const visit = (node: AccessibleNode) => {
    const nodeRole = node.role.toLowerCase();
    const roleOk = !role || nodeRole === role || nodeRole.endsWith(` ${role}`);
    const nodeName = node.name.toLowerCase();
    const nameOk = !name || nodeName.includes(name);
    const shown = node.text ?? (node.value !== undefined ? String(node.value) : "");
    const valueOk = !value || shown.toLowerCase().includes(value);
    if (roleOk && nameOk && valueOk) (!name || nodeName === name ? exact : partial).push(node);
    for (const child of node.children ?? []) visit(child);
  };
  visit(tree);
  return [...exact, ...partial];
}

/** A node without its children, for answers about one element. */
export function withoutChildren(node: AccessibleNode): AccessibleNode {
  const { children: _children, ...rest } = node;
  return rest;
}
