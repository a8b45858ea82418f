/**
 * A tab's page as its accessibility tree, with `ref_N` names for its elements that later commands
 * accept: the tree is Chromium's own (CDP `Accessibility.getFullAXTree`, the one screen readers
 * get), each element's `ref_N` is bound to its DOM node (its backend node id), so it stays the same
 * in every later reading of the page for as long as the element lives, whatever else changes; an
 * element that was removed (or a page that was navigated away from) makes its ref stale, which the
 * commands say. Which elements are on screen comes from one DOM snapshot (`DOMSnapshot`) and the
 * viewport (`Page.getLayoutMetrics`).
 *
 * One line per element: `role "name" [ref_N] value="…" checked …`, indented by depth; text between
 * elements as `text "…"`; containers with neither name nor value are left out (their children take
 * their place). The main frame's document only: an iframe's content is not read.
 */
import type { CDPSession, Page } from "playwright-core";
import { CommandError } from "../common/errors.js";

/** What is read of a node of the accessibility tree. */
interface AxNode {
  nodeId: string;
  ignored: boolean;
  role?: { value?: unknown };
  name?: { value?: unknown };
  description?: { value?: unknown };
  value?: { value?: unknown };
  properties?: { name: string; value: { value?: unknown } }[];
  childIds?: string[];
  backendDOMNodeId?: number;
}

export type PageFilter = "visible" | "interactive" | "all";

export interface ReadPageOptions {
  /** Levels of elements below the start (15 by default). */
  depth: number;
  /** `visible` (default): elements in the viewport; `interactive`: those of them one can act on; `all`. */
  filter: PageFilter;
  /** Start at this element instead of the page. */
  ref?: string;
  /** At most this many characters; the rest is left out, and the text says so. */
  maxChars: number;
}

/** Roles one acts on, besides anything focusable. */
const INTERACTIVE = new Set([
  "button",
  "link",
  "textbox",
  "searchbox",
  "checkbox",
  "radio",
  "combobox",
  "listbox",
  "option",
  "menuitem",
  "menuitemcheckbox",
  "menuitemradio",
  "tab",
  "slider",
  "spinbutton",
  "switch",
  "treeitem",
]);
/** Roles that are structure only: left out when they carry no name and no value. */
const STRUCTURE = new Set(["generic", "none", "LabelText", "MenuListPopup", "group", "Section", "div"]);
/** Words a query may use for a role. */
const ROLE_WORDS: Record<string, string> = {
  textbox: "field input text box entry",
  searchbox: "search field input box",
  combobox: "select dropdown drop-down combo list choice",
  listbox: "list select choice",
  checkbox: "check box tick",
  radio: "radio option choice",
  link: "link",
  button: "button",
  heading: "heading title",
  img: "image picture",
};
const STOP_WORDS = new Set([
  "the",
  "a",
  "an",
  "of",
  "to",
  "for",
  "in",
  "on",
  "with",
  "and",
  "or",
  "that",
  "this",
]);
/** Properties shown on an element's line, in this order. */
const SHOWN_PROPERTIES = [
  "checked",
  "pressed",
  "selected",
  "expanded",
  "disabled",
  "required",
  "readonly",
  "focused",
  "level",
];
/** Refs kept per page before the table starts again (ids keep counting up: an old ref never names a new element). */
const MAX_REFS = 50_000;
const MAX_VALUE = 200;

/** The refs of one page, kept as long as the page is open. */
const tables = new WeakMap<Page, PageRefs>();

export class PageRefs {
  private cdp: Promise<CDPSession> | undefined;
  private readonly byNode = new Map<number, string>();
  private readonly byRef = new Map<string, number>();
  private next = 1;

  private constructor(private readonly page: Page) {}

  static of(page: Page): PageRefs {
    let refs = tables.get(page);
    if (!refs) {
      refs = new PageRefs(page);
      tables.set(page, refs);
    }
    return refs;
  }

  /** The page (or the element `ref`) as lines of its accessibility tree. */
  async readPage(options: ReadPageOptions): Promise<string> {
    const tree = await this.tree(options.filter !== "all");
    const start = options.ref ? tree.nodeOf(await this.nodeId(options.ref)) : tree.root;
    if (!start) throw stale(options.ref ?? "the page");
    const out = new Output(options.maxChars);
    const interactiveOnly = options.filter === "interactive";
    const walk = (node: AxNode, depth: number, parentName: string) => {
      const role = String(node.role?.value ?? "");
      if (role === "InlineTextBox" || (options.filter !== "all" && !tree.visible(node))) return;
      if (role === "StaticText") {
        // Text is shown where it adds to its element's name (a paragraph's words, not a button's).
        const words = text(node.name).trim();
        if (!interactiveOnly && words && depth < options.depth && !parentName.includes(words)) {
          out.line(depth, `text ${quoted(words)}`);
        }
        return;
      }
      const printed =
        !node.ignored &&
        role !== "RootWebArea" &&
        (node === start || !isStructure(node)) &&
        (!interactiveOnly || isInteractive(node));
      if (printed) {
        if (depth >= options.depth) return;
        out.line(depth, this.describe(node));
      }
      const next = printed && !interactiveOnly ? depth + 1 : depth;
      for (const id of node.childIds ?? []) {
        const child = tree.nodes.get(id);
        if (child) walk(child, next, printed ? text(node.name) : parentName);
      }
    };
    walk(start, 0, "");
    const lines = out.lines;
    if (out.left > 0) {
      lines.push(
        `… ${out.left} more lines left out: read a part with ref, a smaller depth or filter "interactive".`,
      );
    }
    return lines.length ? lines.join("\n") : "(no elements)";
  }

  /** The elements whose role, name or value best match the words of `query`, best first. */
  async find(query: string, limit: number): Promise<string> {
    const words = query
      .toLowerCase()
      .split(/[^\p{L}\p{N}]+/u)
      .filter((word) => word && !STOP_WORDS.has(word));
    if (words.length === 0)
      throw new CommandError("invalid_params", "Invalid params: query: give some words to look for");
    // A word that begins a word of the name counts double.
    const starts = words.map((word) => new RegExp(`(^|[^\\p{L}\\p{N}])${escapeRegExp(word)}`, "u"));
    const tree = await this.tree(true);
    const found: { node: AxNode; score: number; order: number }[] = [];
    let order = 0;
    for (const node of tree.nodes.values()) {
      order++;
      const role = String(node.role?.value ?? "");
      if (node.ignored || role === "StaticText" || role === "InlineTextBox" || isStructure(node)) continue;
      if (node.backendDOMNodeId === undefined || role === "RootWebArea") continue;
      const name = `${text(node.name)} ${text(node.value)} ${text(node.description)}`.toLowerCase();
      const kind = `${role.toLowerCase()} ${ROLE_WORDS[role] ?? ""}`;
      let score = 0;
      words.forEach((word, i) => {
        if (starts[i].test(name)) score += 2;
        else if (name.includes(word) || kind.includes(word)) score += 1;
      });
      if (score > 0) found.push({ node, score, order });
    }
    found.sort((a, b) => b.score - a.score || a.order - b.order);
    const best = found.slice(0, limit);
    if (best.length === 0) return `No element matches ${quoted(query)}.`;
    return best
      .map(({ node }) => `${this.describe(node)}${tree.visible(node) ? "" : " (off screen)"}`)
      .join("\n");
  }

  /** The centre of the element in the viewport (CSS pixels), scrolled into view first. */
  async centre(ref: string): Promise<{ x: number; y: number }> {
    const backendNodeId = await this.nodeId(ref);
    const cdp = await this.session();
    try {
      await cdp.send("DOM.scrollIntoViewIfNeeded", { backendNodeId });
      const { quads } = await cdp.send("DOM.getContentQuads", { backendNodeId });
      const quad = quads[0];
      if (!quad) throw new Error("no box");
      return {
        x: (quad[0] + quad[2] + quad[4] + quad[6]) / 4,
        y: (quad[1] + quad[3] + quad[5] + quad[7]) / 4,
      };
    } catch {
      throw new CommandError("failed", `${ref} has no place on the screen (it is hidden or was removed)`);
    }
  }

  /** Scrolls the element into view. */
  async scrollTo(ref: string): Promise<void> {
    const backendNodeId = await this.nodeId(ref);
    await (await this.session()).send("DOM.scrollIntoViewIfNeeded", { backendNodeId }).catch(() => {
      throw new CommandError("failed", `${ref} cannot be scrolled to (it is hidden or was removed)`);
    });
  }

  /**
   * Runs `fn` in the page with the element as `this` and `arg` as its argument; returns what it
   * returned (as JSON).
   */
  async call<T>(ref: string, fn: string, arg?: unknown): Promise<T> {
    const backendNodeId = await this.nodeId(ref);
    const cdp = await this.session();
    const { object } = await cdp.send("DOM.resolveNode", { backendNodeId }).catch(() => {
      throw stale(ref);
    });
    if (!object.objectId) throw stale(ref);
    try {
      const { result, exceptionDetails } = await cdp.send("Runtime.callFunctionOn", {
        objectId: object.objectId,
        functionDeclaration: fn,
        arguments: [{ value: arg }],
        returnByValue: true,
        awaitPromise: true,
      });
      if (exceptionDetails) {
        const message = exceptionDetails.exception?.description?.split("\n")[0] ?? exceptionDetails.text;
        throw new CommandError("failed", `The page threw: ${message}`);
      }
      return result.value as T;
    } finally {
      cdp.send("Runtime.releaseObject", { objectId: object.objectId }).catch(() => undefined);
    }
  }

  /** Sets the files of an `<input type=file>`, as choosing them in its dialog does. */
  async setFiles(ref: string, paths: string[]): Promise<void> {
    const backendNodeId = await this.nodeId(ref);
    await (await this.session())
      .send("DOM.setFileInputFiles", { files: paths, backendNodeId })
      .catch((err) => {
        throw new CommandError(
          "failed",
          `Setting the files of ${ref} failed: ${(err as Error).message.split("\n")[0]}`,
        );
      });
  }

  /** The backend node id of a ref this page handed out. */
  private async nodeId(ref: string): Promise<number> {
    const id = this.byRef.get(ref);
    if (id === undefined) {
      throw new CommandError(
        "not_found",
        `Unknown element ${quoted(ref)}: use a ref from this tab's last read_page or find`,
      );
    }
    return id;
  }

  private refOf(backendNodeId: number): string {
    let ref = this.byNode.get(backendNodeId);
    if (!ref) {
      if (this.byRef.size >= MAX_REFS) {
        this.byRef.clear();
        this.byNode.clear();
      }
      ref = `ref_${this.next++}`;
      this.byNode.set(backendNodeId, ref);
      this.byRef.set(ref, backendNodeId);
    }
    return ref;
  }

  /** One element's line: role, name, ref, value and state. */
  private describe(node: AxNode): string {
    const parts = [String(node.role?.value ?? "unknown")];
    const name = text(node.name).trim();
    if (name) parts.push(quoted(name));
    if (node.backendDOMNodeId !== undefined) parts.push(`[${this.refOf(node.backendDOMNodeId)}]`);
    const value = text(node.value);
    if (value)
      parts.push(`value=${quoted(value.length > MAX_VALUE ? `${value.slice(0, MAX_VALUE)}…` : value)}`);
    for (const key of SHOWN_PROPERTIES) {
      const property = node.properties?.find((p) => p.name === key)?.value.value;
      if (property === undefined || property === false || property === "false") continue;
      parts.push(property === true || property === "true" ? key : `${key}=${String(property)}`);
    }
    const url = node.properties?.find((p) => p.name === "url")?.value.value;
    if (typeof url === "string" && url && String(node.role?.value) === "link")
      parts.push(`url=${quoted(url)}`);
    return parts.join(" ");
  }

  private async tree(needBoxes: boolean): Promise<Tree> {
    const cdp = await this.session();
    const [{ nodes }, boxes] = await Promise.all([
      cdp.send("Accessibility.getFullAXTree", {}) as Promise<{ nodes: AxNode[] }>,
      needBoxes ? this.boxes(cdp) : undefined,
    ]);
    return new Tree(nodes, boxes);
  }

  /** Which DOM nodes of the main document are (partly) in the viewport, and which have a box at all. */
  private async boxes(cdp: CDPSession): Promise<Boxes> {
    const [snapshot, metrics] = await Promise.all([
      cdp.send("DOMSnapshot.captureSnapshot", { computedStyles: [] }),
      cdp.send("Page.getLayoutMetrics"),
    ]);
    const view = metrics.cssVisualViewport;
    const inView = new Set<number>();
    const laidOut = new Set<number>();
    const document = snapshot.documents[0];
    if (document) {
      const backend = document.nodes.backendNodeId ?? [];
      document.layout.nodeIndex.forEach((index, i) => {
        const [x, y, width, height] = document.layout.bounds[i];
        const id = backend[index];
        laidOut.add(id);
        const visible =
          width > 0 &&
          height > 0 &&
          x < view.pageX + view.clientWidth &&
          x + width > view.pageX &&
          y < view.pageY + view.clientHeight &&
          y + height > view.pageY;
        if (visible) inView.add(id);
      });
    }
    return { inView, laidOut };
  }

  private session(): Promise<CDPSession> {
    this.cdp ??= this.page
      .context()
      .newCDPSession(this.page)
      .catch((err) => {
        this.cdp = undefined;
        throw err;
      });
    return this.cdp;
  }
}

interface Boxes {
  inView: Set<number>;
  laidOut: Set<number>;
}

/** The nodes of one reading, and which of them are on screen. */
class Tree {
  readonly nodes = new Map<string, AxNode>();
  readonly root: AxNode | undefined;
  private readonly parents = new Map<string, AxNode>();

  constructor(
    list: AxNode[],
    private readonly boxes: Boxes | undefined,
  ) {
    for (const node of list) this.nodes.set(node.nodeId, node);
    for (const node of list) for (const id of node.childIds ?? []) this.parents.set(id, node);
    this.root = list.find((node) => !this.parents.has(node.nodeId));
  }

  nodeOf(backendNodeId: number): AxNode | undefined {
    for (const node of this.nodes.values()) if (node.backendDOMNodeId === backendNodeId) return node;
    return undefined;
  }

  /**
   * Whether a node is in the viewport: by its own box, or (without one: an option of a closed
   * list, text) by its nearest ancestor's that has one.
   */
  visible(node: AxNode): boolean {
    if (!this.boxes) return true;
    for (let at: AxNode | undefined = node; at; at = this.parents.get(at.nodeId)) {
      const id = at.backendDOMNodeId;
      if (id !== undefined && this.boxes.laidOut.has(id)) return this.boxes.inView.has(id);
    }
    return true;
  }
}

/** Lines with a budget of characters. */
class Output {
  readonly lines: string[] = [];
  left = 0;
  private used = 0;

  constructor(private readonly maxChars: number) {}

  line(depth: number, text: string): void {
    const line = `${"  ".repeat(depth)}${text}`;
    if (this.left > 0 || this.used + line.length + 1 > this.maxChars) {
      this.left++;
      return;
    }
    this.used += line.length + 1;
    this.lines.push(line);
  }
}

function isStructure(node: AxNode): boolean {
  const role = String(node.role?.value ?? "");
  return STRUCTURE.has(role) && !text(node.name).trim() && !text(node.value);
}

function isInteractive(node: AxNode): boolean {
  if (INTERACTIVE.has(String(node.role?.value ?? ""))) return true;
  return node.properties?.some((p) => p.name === "focusable" && p.value.value === true) ?? false;
}

function text(value: { value?: unknown } | undefined): string {
  const v = value?.value;
  return v === undefined || v === null ? "" : String(v);
}

function quoted(value: string): string {
  return JSON.stringify(value);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function stale(ref: string): CommandError {
  return new CommandError(
    "not_found",
    `${ref} is no longer on the page (it was removed, or the page changed): read the page again`,
  );
}
