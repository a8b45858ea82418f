/**
 * The accessibility tree and actions on its elements: `get_accessibility_tree`, `find_element`,
 * `click_element`, `set_element_text`. Elements are referred to by the `id` the tree gives them, or
 * found by role, title and value.
 */
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import { type CommandContext, defineCommand } from "../src/computer/command.js";
import { type AccessibleNode, findElements, withoutChildren } from "../src/desktop/accessibility.js";

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

/** The first element matching a search, or `not_found` naming what was looked for. */
async function findOne(p: Search, ctx: CommandContext): Promise<AccessibleNode> {
  const name = p.title ?? p.name ?? undefined;
  if (!p.role && !name && !p.value) {
    throw new CommandError(
      "invalid_params",
      "Invalid params: give at least one of role, title (name) or value",
    );
  }
  const a11y = await ctx.accessibility();
  const { tree } = await a11y.tree({
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
  if (p.id) return (await ctx.accessibility()).element(p.id);
  return findOne(p, ctx);
}

export const getAccessibilityTree = defineCommand({
  name: "get_accessibility_tree",
  description:
    "The accessibility tree of the running applications: role, name, states, bounds in screen pixels, " +
    "text or value, and children, with an id per element. Filter by app or window; limit depth and size.",
  params: z.object({
    ...scope,
    max_depth: z.number().int().min(1).max(100).default(30),
    max_nodes: z.number().int().min(1).max(20_000).default(2000),
  }),
  result: z.object({ tree: treeNode, node_count: z.number(), truncated: z.boolean() }),
  handler: async (p, ctx) => {
    const a11y = await ctx.accessibility();
    const { tree, nodeCount, truncated } = await a11y.tree({
      app: p.app ?? undefined,
      window: p.window ?? undefined,
      maxDepth: p.max_depth,
      maxNodes: p.max_nodes,
    });
    return { tree, node_count: nodeCount, truncated };
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
    "Clicks an element given by id or found by role/title/value: its accessibility action (click, press, " +
    "activate) when it has one, else a left click at the centre of its bounds.",
  params: z.object({
    ...target,
    method: z.enum(["auto", "action", "mouse"]).default("auto").describe("auto: the action, else the mouse"),
  }),
  result: z.object({ element, method: z.enum(["action", "mouse"]), action: z.string().optional() }),
  input: true,
  handler: async (p, ctx) => {
    const found = await resolveTarget(p, ctx);
    if (p.method !== "mouse") {
      const action = await (await ctx.accessibility()).activate(found.id);
      if (action) return { element: found, method: "action" as const, action };
      if (p.method === "action") {
        throw new CommandError(
          "not_supported",
          `The element offers no action (a ${found.role}): ${found.id}`,
        );
      }
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
    const text = await (await ctx.accessibility()).setText(found.id, p.text);
    return { element: { ...found, text }, text };
  },
});

export default [getAccessibilityTree, findElement, clickElement, setElementText];
