/** Reading AT-SPI objects into `AccessibleNode`s, and walking the tree within limits. */
import type dbus from "dbus-next";
import type { AccessibleNode, AccessibleTree, NodeDetails, TreeOptions } from "../accessibility.js";
import type { Rect } from "../backend.js";
import type { AccessibleRef, AtspiConnection } from "./connection.js";
import { decodeStates, IFACE, REGISTRY_ROOT, SCREEN_COORDS } from "./states.js";

/** Longest text returned for one element (with `details`: `DETAILED_TEXT_CHARS`). */
const MAX_TEXT_CHARS = 4000;
const DETAILED_TEXT_CHARS = 1_000_000;
/** Off-screen elements report this as a coordinate. */
const INT32_MIN = -2147483648;

/** `:1.23/org/a11y/atspi/accessible/12` — the bus name, then the object path. */
export function elementId(ref: AccessibleRef): string {
  return `${ref.bus}${ref.path}`;
}

const BUS_NAME = /^(:[0-9]+(\.[0-9]+)+|[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)+)$/;
const OBJECT_PATH = /^(\/[A-Za-z0-9_]+)+$/;

/** The reference an element id stands for, or null when the id is not one this module makes. */
export function parseElementId(id: string): AccessibleRef | null {
  const slash = id.indexOf("/");
  if (slash <= 0) return null;
  const ref = { bus: id.slice(0, slash), path: id.slice(slash) };
  return BUS_NAME.test(ref.bus) && OBJECT_PATH.test(ref.path) ? ref : null;
}

export interface ReadNode {
  node: AccessibleNode;
  interfaces: Set<string>;
  children: AccessibleRef[];
}

/**
 * Everything about one object in two rounds of calls in flight together. `withChildren: false`
 * leaves the list of children out (elements at the depth limit, single elements).
 */
export async function readNode(
  conn: AtspiConnection,
  ref: AccessibleRef,
  withChildren = true,
  details = false,
): Promise<ReadNode> {
  const optional = <T>(p: Promise<T>) => p.catch(() => undefined);
  const [roleName, props, state, ifaces] = await Promise.all([
    conn.call<[string]>(ref, IFACE.accessible, "GetRoleName"),
    optional(
      conn.call<[Record<string, dbus.Variant>]>(ref, IFACE.properties, "GetAll", "s", [IFACE.accessible]),
    ),
    optional(conn.call<[number[]]>(ref, IFACE.accessible, "GetState")),
    optional(conn.call<[string[]]>(ref, IFACE.accessible, "GetInterfaces")),
  ]);
  const interfaces = new Set(ifaces?.[0] ?? []);
  const name = String(props?.[0]?.Name?.value ?? "");
  const description = String(props?.[0]?.Description?.value ?? "");
  const childCount = props?.[0]?.ChildCount?.value;

  const [children, bounds, text, value, actions, extra] = await Promise.all([
    withChildren && childCount !== 0
      ? optional(conn.call<[[string, string][]]>(ref, IFACE.accessible, "GetChildren"))
      : undefined,
    interfaces.has(IFACE.component) ? optional(readBounds(conn, ref)) : undefined,
    // A label's name is its text: one call less per label (they are most of a big tree).
    interfaces.has(IFACE.text) && (details || roleName[0] !== "label" || name === "")
      ? optional(readText(conn, ref, details ? DETAILED_TEXT_CHARS : MAX_TEXT_CHARS))
      : undefined,
    interfaces.has(IFACE.value)
      ? optional(conn.property<number>(ref, IFACE.value, "CurrentValue"))
      : undefined,
    interfaces.has(IFACE.action) && !details ? optional(readActions(conn, ref)) : undefined,
    details ? readDetails(conn, ref, interfaces) : undefined,
  ]);

  const node: AccessibleNode = {
    id: elementId(ref),
    role: roleName[0],
    name,
    ...(description ? { description } : {}),
    states: decodeStates(state?.[0] ?? []),
    bounds: bounds ?? null,
  };
  if (details && text) {
    node.text = text;
  } else if (text !== undefined && text !== "" && (text !== name || interfaces.has(IFACE.editableText))) {
    node.text = text;
  } else if (interfaces.has(IFACE.editableText)) {
    node.text = text ?? "";
  }
  if (typeof value === "number") node.value = value;
  if (actions?.length) node.actions = actions;
  if (extra) {
    node.details = extra;
    if (extra.actions.length) node.actions = extra.actions.map((a) => a.name);
  }
  return {
    node,
    interfaces,
    children: (children?.[0] ?? []).map(([bus, path]) => ({ bus, path })),
  };
}

async function readBounds(conn: AtspiConnection, ref: AccessibleRef): Promise<Rect | undefined> {
  const [[x, y, width, height]] = await conn.call<[[number, number, number, number]]>(
    ref,
    IFACE.component,
    "GetExtents",
    "u",
    [SCREEN_COORDS],
  );
  if (x === INT32_MIN || y === INT32_MIN || width <= 0 || height <= 0) return undefined;
  return { x, y, width, height };
}

export async function readText(
  conn: AtspiConnection,
  ref: AccessibleRef,
  maxChars = MAX_TEXT_CHARS,
): Promise<string> {
  const [text] = await conn.call<[string]>(ref, IFACE.text, "GetText", "ii", [0, maxChars]);
  return text;
}

/** Object attributes, interfaces, actions with their descriptions and key bindings, value range. */
async function readDetails(
  conn: AtspiConnection,
  ref: AccessibleRef,
  interfaces: Set<string>,
): Promise<NodeDetails> {
  const optional = <T>(p: Promise<T>) => p.catch(() => undefined);
  const [attributes, actions, range] = await Promise.all([
    optional(conn.call<[Record<string, string>]>(ref, IFACE.accessible, "GetAttributes")),
    interfaces.has(IFACE.action)
      ? optional(conn.call<[[string, string, string][]]>(ref, IFACE.action, "GetActions"))
      : undefined,
    interfaces.has(IFACE.value)
      ? optional(
          Promise.all(
            ["MinimumValue", "MaximumValue", "MinimumIncrement"].map((p) =>
              conn.property<number>(ref, IFACE.value, p),
            ),
          ),
        )
      : undefined,
  ]);
  return {
    attributes: attributes?.[0] ?? {},
    interfaces: [...interfaces].map((i) => i.replace(/^org\.a11y\.atspi\./, "")),
    actions: await actionDetails(conn, ref, actions?.[0] ?? []),
    ...(range ? { range: { min: range[0], max: range[1], step: range[2] } } : {}),
  };
}

export async function readActions(conn: AtspiConnection, ref: AccessibleRef): Promise<string[]> {
  const [actions] = await conn.call<[[string, string, string][]]>(ref, IFACE.action, "GetActions");
  return actions.map(([name]) => name);
}

/**
 * Each action's name (GetActions gives the localized one: "Click" where pyatspi's getName says
 * "click"), description and key binding.
 */
async function actionDetails(
  conn: AtspiConnection,
  ref: AccessibleRef,
  actions: [string, string, string][],
): Promise<NodeDetails["actions"]> {
  const names = await Promise.all(
    actions.map((_, i) =>
      conn
        .call<[string]>(ref, IFACE.action, "GetName", "i", [i])
        .then(([name]) => name)
        .catch(() => undefined),
    ),
  );
  return actions.map(([localized, description, keybinding], i) => ({
    name: names[i] || localized,
    description,
    keybinding,
  }));
}

/**
 * The tree from the desktop down: applications (level 1), their windows (level 2) and so on, each
 * level read in parallel. `app` and `window` filters prune levels 1 and 2.
 */
export async function walkTree(conn: AtspiConnection, options: TreeOptions): Promise<AccessibleTree> {
  let budget = options.maxNodes;
  let truncated = false;
  const appFilter = options.app?.toLowerCase();
  const windowFilter = options.window?.toLowerCase();

  const keep = (node: AccessibleNode, depth: number) => {
    if (depth === 1 && appFilter) return node.name.toLowerCase().includes(appFilter);
    if (depth === 2 && windowFilter) return node.name.toLowerCase().includes(windowFilter);
    return true;
  };

  const expand = async (read: ReadNode, depth: number): Promise<AccessibleNode> => {
    const { node } = read;
    if (depth >= options.maxDepth || read.children.length === 0) return node;
    const refs = read.children.slice(0, Math.max(0, budget));
    if (refs.length < read.children.length) truncated = true;
    budget -= refs.length;
    const reads = await Promise.all(
      refs.map((ref) => readNode(conn, ref, depth + 1 < options.maxDepth, options.details).catch(() => null)),
    );
    const kept = reads.filter((r): r is ReadNode => r !== null && keep(r.node, depth + 1));
    // Pruned siblings give their budget back before the next level is read.
    budget += refs.length - kept.length;
    node.children = await Promise.all(kept.map((r) => expand(r, depth + 1)));
    return node;
  };

  const root = await readNode(conn, REGISTRY_ROOT, true, options.details);
  // The desktop node's own extents are a fixed size, not the screen's: leave them out.
  root.node.bounds = null;
  const tree = await expand(root, 0);
  return { tree, nodeCount: countNodes(tree), truncated };
}

function countNodes(node: AccessibleNode): number {
  return 1 + (node.children ?? []).reduce((sum, child) => sum + countNodes(child), 0);
}
