/**
 * The accessibility tree and actions on its elements: `get_accessibility_tree`, `find_element`,
 * `click_element`, `set_element_text`. Elements are referred to by the `id` the tree gives them, or
 * found by role, title and value.
 */
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import { type CommandContext, defineCommand } from "../src/computer/core/command.js";
import {
  type AccessibleNode,
  type AccessibleTree,
  findElements,
  type TreeOptions,
  withoutChildren,
} from "../src/desktop/accessibility.js";
import type { WindowInfo } from "../src/desktop/backend.js";

const rect = z.object({ x: z.number(), y: z.number(), width: z.number(), height: z.number() });
const element = z.object({
  id: z.string(),
  role: z.string(),
  name: z.string(),
  description: z.string().optional(),
  states: z.array(z.string()),
  bounds: rect.nullable(),
  text: z.string().optional(),
  value: z.number().optional(),
  actions: z.array(z.string()).optional(),
  source: z
    .literal("x11")
    .optional()
    .describe("x11: a window whose application is not on the accessibility bus"),
  pid: z.number().optional(),
  app: z.string().optional(),
  details: z
    .object({
      attributes: z.record(z.string(), z.string()),
      interfaces: z.array(z.string()),
      actions: z.array(z.object({ name: z.string(), description: z.string(), keybinding: z.string() })),
      range: z.object({ min: z.number(), max: z.number(), step: z.number() }).optional(),
    })
    .optional()
    .describe("with details: true"),
});
type TreeNode = z.infer<typeof element> & { children?: TreeNode[] };
const treeNode: z.ZodType<TreeNode> = element.extend({
  children: z.array(z.lazy(() => treeNode)).optional(),
});

const scope = {
  app: z.string().min(1).nullish().describe("only applications whose name contains this"),
  window: z.string().min(1).nullish().describe("only top-level windows whose title contains this"),
};
const search = {
  ...scope,
  role: z
    .string()
    .min(1)
    .nullish()
    .describe("e.g. push button, text, label; 'button' also finds 'push button'"),
  title: z.string().min(1).nullish().describe("the element's name (exact matches first, then containing)"),
  name: z.string().min(1).nullish().describe("same as title"),
  value: z.string().min(1).nullish().describe("text or value the element holds (containing)"),
};
const target = {
  id: z.string().min(1).max(500).nullish().describe("an element id from the tree or find_element"),
  ...search,
};

/** How much of the tree a search walks. */
const SEARCH_NODES = 5000;
const SEARCH_DEPTH = 50;

const searchParams = z.object(search);
type Search = z.output<typeof searchParams>;

const X11_PREFIX = "x11:";
/** What a window known only to the window manager says of itself. */
const NO_TREE =
  "this application exposes no accessibility tree (its window is known from the window manager)";

/**
 * A sentence for a tree in which no application answered on the accessibility bus, so that an
 * empty tree is not taken for an empty window.
 */
function noteOn(tree: AccessibleNode, scoped: boolean): string | undefined {
  const apps = tree.children ?? [];
  if (apps.some((app) => app.source !== "x11")) return undefined;
  if (apps.length === 0) {
    return scoped ? "no application or window matches app/window" : "no application is on the desktop";
  }
  return scoped
    ? "this application exposes no accessibility tree: only its window is listed, from the window manager (source: x11)"
    : "no application exposes an accessibility tree (no accessibility bus?): only the windows are listed, from the window manager (source: x11)";
}

/** A top-level window as the window manager knows it, as a tree node. */
function windowNode(w: WindowInfo): AccessibleNode {
  const states = w.minimized ? ["iconified"] : ["showing", "visible"];
  if (w.active) states.push("active", "focused");
  return {
    id: `${X11_PREFIX}${w.id}`,
    role: "frame",
    name: w.title,
    states,
    bounds: w.bounds,
    description: NO_TREE,
    source: "x11",
    ...(w.pid !== null ? { pid: w.pid } : {}),
    ...(w.appName !== null ? { app: w.appName } : {}),
  };
}

/** The windows of the desktop, or undefined when there is no desktop to ask. */
async function desktopWindows(ctx: CommandContext): Promise<WindowInfo[] | undefined> {
  try {
    return await (await ctx.desktop()).listWindows();
  } catch {
    return undefined;
  }
}

/**
 * The tree of the accessibility bus, completed by the windows the window manager knows and the bus
 * does not (applications without AT-SPI, or no bus at all): those are `source: "x11"` nodes. Fails
 * only when neither is there.
 */
async function desktopTree(ctx: CommandContext, options: TreeOptions): Promise<AccessibleTree> {
  const [bus, windows] = await Promise.all([
    ctx
      .accessibility()
      .then((a11y) => a11y.tree(options))
      .catch((err: unknown) => err),
    desktopWindows(ctx),
  ]);
  if (!windows) {
    if (bus instanceof Error) throw bus;
    return bus as AccessibleTree;
  }
  const named = new Set<string>();
  const tree: AccessibleTree =
    bus instanceof Error
      ? {
          tree: {
            id: `${X11_PREFIX}desktop`,
            role: "desktop frame",
            name: "desktop",
            states: [],
            bounds: null,
            source: "x11",
            children: [],
          },
          nodeCount: 1,
          truncated: false,
        }
      : (bus as AccessibleTree);
  for (const app of tree.tree.children ?? []) for (const win of app.children ?? []) named.add(win.name);
  const app = options.app?.toLowerCase();
  const title = options.window?.toLowerCase();
  const extra = windows.filter(
    (w) =>
      !named.has(w.title) &&
      (!app || (w.appName ?? "").toLowerCase().includes(app)) &&
      (!title || w.title.toLowerCase().includes(title)),
  );
  const room = Math.max(0, options.maxNodes - tree.nodeCount);
  const added = extra.slice(0, room).map(windowNode);
  tree.tree.children = [...(tree.tree.children ?? []), ...added];
  return {
    tree: tree.tree,
    nodeCount: tree.nodeCount + added.length,
    truncated: tree.truncated || added.length < extra.length,
  };
}

/** The first element matching a search, or `not_found` naming what was looked for. */
async function findOne(p: Search, ctx: CommandContext): Promise<AccessibleNode> {
  const name = p.title ?? p.name ?? undefined;
  if (!p.role && !name && !p.value) {
    throw new CommandError(
      "invalid_params",
      "Invalid params: give at least one of role, title (name) or value",
    );
  }
  const { tree } = await desktopTree(ctx, {
    app: p.app ?? undefined,
    window: p.window ?? undefined,
    maxDepth: SEARCH_DEPTH,
    maxNodes: SEARCH_NODES,
  });
  const [found] = findElements(tree, { role: p.role ?? undefined, name, value: p.value ?? undefined });
  if (!found) {
    const wanted = Object.entries({ role: p.role, title: name, value: p.value, app: p.app, window: p.window })
      .filter(([, v]) => v)
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(", ");
    throw new CommandError("not_found", `No element matches ${wanted}`);
  }
  return withoutChildren(found);
}

/** The element an `id` names, or else the first one the search fields find. */
async function resolveTarget(p: Search & { id?: string | null }, ctx: CommandContext) {
  if (p.id?.startsWith(X11_PREFIX)) {
    const id = p.id.slice(X11_PREFIX.length);
    const found = (await desktopWindows(ctx))?.find((w) => w.id === id);
    if (!found) throw new CommandError("not_found", `No such window: ${p.id}`);
    return windowNode(found);
  }
  if (p.id) return (await ctx.accessibility()).element(p.id);
  return findOne(p, ctx);
}

export const getAccessibilityTree = defineCommand({
  name: "get_accessibility_tree",
  description:
    "The accessibility tree of the running applications: role, name, states, bounds in screen pixels, " +
    "text or value, and children, with an id per element. Windows whose application is not on the " +
    "accessibility bus are added from the window manager (source: x11). Filter by app or window; limit " +
    "depth and size.",
  params: z.object({
    ...scope,
    max_depth: z.number().int().min(1).max(100).default(30),
    max_nodes: z.number().int().min(1).max(20_000).default(2000),
    details: z
      .boolean()
      .default(false)
      .describe("also object attributes, interfaces, action descriptions and key bindings, value ranges"),
  }),
  result: z.object({
    tree: treeNode,
    node_count: z.number(),
    truncated: z.boolean(),
    note: z
      .string()
      .optional()
      .describe("Said when no application in the tree answered on the accessibility bus"),
  }),
  handler: async (p, ctx) => {
    const { tree, nodeCount, truncated } = await desktopTree(ctx, {
      app: p.app ?? undefined,
      window: p.window ?? undefined,
      maxDepth: p.max_depth,
      maxNodes: p.max_nodes,
      details: p.details,
    });
    const note = noteOn(tree, Boolean(p.app || p.window));
    return { tree, node_count: nodeCount, truncated, ...(note ? { note } : {}) };
  },
});

export const findElement = defineCommand({
  name: "find_element",
  description:
    "Finds the first user-interface element with the given role, title (name) and/or value and returns " +
    "it with its id and bounds in screen pixels; a not_found failure when nothing matches.",
  params: searchParams,
  result: z.object({ element }),
  handler: async (p, ctx) => ({ element: await findOne(p, ctx) }),
});

export const clickElement = defineCommand({
  name: "click_element",
  description:
    "Clicks an element given by id or found by role/title/value. An editable element (a text entry) is " +
    "focused, for the typing that follows; anything else gets its accessibility action (click, press, " +
    "activate) when it has one; else, or with method mouse, a left click at the centre of its bounds. " +
    "The reply says which was done.",
  params: z.object({
    ...target,
    method: z
      .enum(["auto", "action", "focus", "mouse"])
      .default("auto")
      .describe("auto: focus an editable element, else its action, else the mouse"),
  }),
  result: z.object({ element, method: z.enum(["action", "focus", "mouse"]), action: z.string().optional() }),
  input: true,
  handler: async (p, ctx) => {
    const found = await resolveTarget(p, ctx);
    const onBus = found.source !== "x11";
    const editable = found.states.includes("editable");
    if (onBus && (p.method === "focus" || (p.method === "auto" && editable))) {
      if (await (await ctx.accessibility()).focus(found.id))
        return { element: found, method: "focus" as const };
      if (p.method === "focus") {
        throw new CommandError(
          "not_supported",
          `The element cannot take the focus (a ${found.role}): ${found.id}`,
        );
      }
    } else if (onBus && (p.method === "action" || p.method === "auto")) {
      const action = await (await ctx.accessibility()).activate(found.id);
      if (action) return { element: found, method: "action" as const, action };
      if (p.method === "action") {
        throw new CommandError(
          "not_supported",
          `The element offers no action (a ${found.role}): ${found.id}`,
        );
      }
    } else if (p.method === "action" || p.method === "focus") {
      throw new CommandError(
        "not_supported",
        `A window known only to the window manager has no ${p.method}: ${found.id}`,
      );
    }
    if (!found.bounds) {
      throw new CommandError("failed", `The element has no position on the screen to click: ${found.id}`);
    }
    const desktop = await ctx.desktop();
    const x = Math.round(found.bounds.x + found.bounds.width / 2);
    const y = Math.round(found.bounds.y + found.bounds.height / 2);
    await desktop.moveCursor({ x, y });
    await desktop.mouseButton("left", "down");
    await desktop.mouseButton("left", "up");
    return { element: found, method: "mouse" as const };
  },
});

export const setElementText = defineCommand({
  name: "set_element_text",
  description:
    "Replaces the text of an editable element (given by id or found by role/title/value) without key " +
    "events, so any Unicode text goes in exactly; returns the text read back.",
  params: z.object({ ...target, text: z.string().max(1_000_000) }),
  result: z.object({ element, text: z.string() }),
  handler: async (p, ctx) => {
    const found = await resolveTarget(p, ctx);
    if (found.source === "x11") {
      throw new CommandError(
        "not_supported",
        `A window known only to the window manager has no text to set: ${found.id}`,
      );
    }
    const text = await (await ctx.accessibility()).setText(found.id, p.text);
    return { element: { ...found, text }, text };
  },
});

export default [getAccessibilityTree, findElement, clickElement, setElementText];
