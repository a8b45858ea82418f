/**
 * The browser by DOM commands (`browser_*`), also served as cua's `POST /playwright_exec` (its
 * command names without the prefix). The browser is the system's Chromium with a window on this
 * desktop (src/browser/session.ts); coordinates are CSS pixels of the page's viewport. Every command
 * that acts on a page takes `tab_id` (`browser_tabs` lists them; default the current tab), and the
 * page's elements can be named by the `ref_N` that `browser_read_page` and `browser_find` give
 * (src/browser/page-refs.ts): what Claude's browser toolset needs (`hangar/client/anthropic`).
 */
import { isAbsolute, relative, sep } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Page } from "playwright-core";
import { z } from "zod";
import { pageChords, pageKeysOfChord } from "../src/browser/keys.js";
import { PageRefs } from "../src/browser/page-refs.js";
import type { Tab } from "../src/browser/session.js";
import { CommandError } from "../src/common/errors.js";
import type { FileSystem } from "../src/common/file-system.js";
import { Bytes, bytesField } from "../src/computer/core/bytes.js";
import { type CommandContext, defineCommand } from "../src/computer/core/command.js";

const timeoutParam = z
  .number()
  .positive()
  .max(300)
  .default(30)
  .describe("seconds to wait for the page (navigation, selectors)");
const tabParam = z
  .string()
  .max(40)
  .nullish()
  .describe("The tab to act in (browser_tabs lists them); default the current one");
const refParam = z
  .string()
  .regex(/^ref_\d{1,9}$/, "expected a ref such as ref_12, from browser_read_page or browser_find")
  .describe("An element, by the ref browser_read_page or browser_find gave it");
const pageResult = z.object({ url: z.string(), title: z.string() });
const empty = z.object({});
/** A command's deadline: its own timeout, plus the time to start the browser the first time. */
const deadline = (p: { timeout: number }) => p.timeout * 1000 + 30_000;

/** The page of the tab asked for (the current one by default), waiting at most `timeout` seconds in it. */
async function currentPage(ctx: CommandContext, timeout?: number, tabId?: string | null) {
  const page = await (await ctx.browser()).page(tabId);
  if (timeout !== undefined) page.setDefaultTimeout(timeout * 1000);
  return page;
}

/** Playwright's errors as one readable line (its messages carry call logs). */
async function attempt<T>(what: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof CommandError) throw err;
    const message = (err as Error).message.split("\n")[0].replace(/^[a-zA-Z.]+: /, "");
    const code = (err as Error).name === "TimeoutError" ? "timeout" : "failed";
    throw new CommandError(code, `${what} failed: ${message}`);
  }
}

const where = async (page: Page) => ({ url: page.url(), title: await page.title().catch(() => "") });

/** A point of the viewport: given, or the centre of the element `ref` (scrolled into view). */
async function pointOf(page: Page, at: { x?: number | null; y?: number | null; ref?: string | null }) {
  if (at.ref) return PageRefs.of(page).centre(at.ref);
  if (at.x == null || at.y == null) {
    throw new CommandError("invalid_params", "Invalid params: give x and y, or ref");
  }
  return { x: at.x, y: at.y };
}

/** Runs `work` with modifier keys held down, releasing them whatever happens. */
async function holding(page: Page, modifiers: readonly string[], work: () => Promise<unknown>) {
  const keys = modifiers.length ? pageKeysOfChord(modifiers.join("+")) : [];
  const held: string[] = [];
  try {
    for (const key of keys) {
      await page.keyboard.down(key);
      held.push(key);
    }
    await work();
  } finally {
    for (const key of held.reverse()) await page.keyboard.up(key).catch(() => undefined);
  }
}

const modifiersParam = z
  .array(z.string().min(1).max(40))
  .max(8)
  .default([])
  .describe("Keys held during the action (ctrl, shift, alt, meta)");
const pointParams = {
  x: z.number().finite().nullish(),
  y: z.number().finite().nullish(),
  ref: refParam.nullish(),
};

export const browserVisitUrl = defineCommand({
  name: "browser_visit_url",
  description:
    "Opens a URL in the browser's current tab (or tab_id) and waits for the page to load; returns its URL, " +
    "title and HTTP status.",
  params: z.object({ url: z.string().min(1).max(100_000), tab_id: tabParam, timeout: timeoutParam }),
  result: pageResult.extend({ status: z.number().int().nullable() }),
  deadlineMs: deadline,
  handler: async ({ url, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    const response = await attempt(`Opening ${url}`, () => page.goto(url, { waitUntil: "load" }));
    return { ...(await where(page)), status: response?.status() ?? null };
  },
});

export const browserClick = defineCommand({
  name: "browser_click",
  description:
    "Clicks at x,y of the page's viewport (CSS pixels), or on the element ref; click_count 2 or 3 for " +
    "double and triple clicks, modifiers held meanwhile.",
  params: z.object({
    ...pointParams,
    button: z.enum(["left", "right", "middle"]).default("left"),
    click_count: z.number().int().min(1).max(3).default(1),
    modifiers: modifiersParam,
    tab_id: tabParam,
    timeout: timeoutParam,
  }),
  result: pageResult,
  deadlineMs: deadline,
  handler: async ({ button, click_count, modifiers, tab_id, timeout, ...at }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    const { x, y } = await pointOf(page, at);
    await holding(page, modifiers, () =>
      attempt("The click", () => page.mouse.click(x, y, { button, clickCount: click_count })),
    );
    return where(page);
  },
});

export const browserType = defineCommand({
  name: "browser_type",
  description: "Types text into the element that has the focus in the page.",
  params: z.object({ text: z.string().max(100_000), tab_id: tabParam, timeout: timeoutParam }),
  result: empty,
  deadlineMs: deadline,
  handler: async ({ text, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    await attempt("Typing", () => page.keyboard.type(text));
    return {};
  },
});

export const browserScroll = defineCommand({
  name: "browser_scroll",
  description:
    "Scrolls the page by delta_x, delta_y CSS pixels (positive: right, down), with the pointer at x,y when " +
    "given (what scrolls is what is under it).",
  params: z.object({
    delta_x: z.number().finite().default(0),
    delta_y: z.number().finite().default(0),
    x: z.number().finite().nullish(),
    y: z.number().finite().nullish(),
    tab_id: tabParam,
    timeout: timeoutParam,
  }),
  result: empty,
  deadlineMs: deadline,
  handler: async ({ delta_x, delta_y, x, y, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    if (x != null && y != null) await attempt("Moving the pointer", () => page.mouse.move(x, y));
    await attempt("Scrolling", () => page.mouse.wheel(delta_x, delta_y));
    return {};
  },
});

export const browserWebSearch = defineCommand({
  name: "browser_web_search",
  description: "Searches the web for query (DuckDuckGo unless HANGAR_SEARCH_URL says otherwise).",
  params: z.object({ query: z.string().min(1).max(2000), timeout: timeoutParam }),
  result: pageResult,
  deadlineMs: deadline,
  handler: async ({ query, timeout }, ctx) => {
    const session = await ctx.browser();
    const page = await currentPage(ctx, timeout);
    const url = session.searchUrl(query);
    await attempt(`Searching (${url})`, () => page.goto(url, { waitUntil: "domcontentloaded" }));
    return where(page);
  },
});

export const browserScreenshot = defineCommand({
  name: "browser_screenshot",
  description:
    "A PNG of the page's viewport (or the whole page, or a region of the viewport), base64 in `screenshot` " +
    "as cua's clients read it.",
  params: z.object({
    full_page: z.boolean().default(false),
    region: z
      .object({
        x: z.number().finite().min(0),
        y: z.number().finite().min(0),
        width: z.number().finite().positive(),
        height: z.number().finite().positive(),
      })
      .nullish()
      .describe("A part of the viewport (CSS pixels) instead of all of it"),
    tab_id: tabParam,
    timeout: timeoutParam,
  }),
  result: z.object({ screenshot: bytesField("the PNG, base64", { mimeType: "image/png" }) }),
  deadlineMs: deadline,
  handler: async ({ full_page, region, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    const png = await attempt("The screenshot", () =>
      page.screenshot({ fullPage: full_page, type: "png", ...(region ? { clip: region } : {}) }),
    );
    return { screenshot: new Bytes(png, "image/png") };
  },
});

export const browserGetCurrentUrl = defineCommand({
  name: "browser_get_current_url",
  description: "The URL and title of the browser's current tab (or tab_id).",
  params: z.object({ tab_id: tabParam }),
  result: pageResult,
  handler: async ({ tab_id }, ctx) => where(await currentPage(ctx, undefined, tab_id)),
});

function historyCommand<const N extends "browser_go_back" | "browser_go_forward" | "browser_reload">(
  name: N,
  description: string,
  go: (page: Page) => ReturnType<Page["reload"]>,
) {
  return defineCommand({
    name,
    description,
    params: z.object({ tab_id: tabParam, timeout: timeoutParam }),
    result: pageResult.extend({ status: z.number().int().nullable() }),
    deadlineMs: deadline,
    handler: async ({ tab_id, timeout }, ctx) => {
      const page = await currentPage(ctx, timeout, tab_id);
      const response = await attempt("Going through the history", () => go(page));
      return { ...(await where(page)), status: response?.status() ?? null };
    },
  });
}

export const browserGoBack = historyCommand(
  "browser_go_back",
  "Goes back one page in the tab's history.",
  (page) => page.goBack(),
);
export const browserGoForward = historyCommand(
  "browser_go_forward",
  "Goes forward one page in the tab's history.",
  (page) => page.goForward(),
);
export const browserReload = historyCommand("browser_reload", "Loads the tab's page again.", (page) =>
  page.reload(),
);

export const browserGetPageText = defineCommand({
  name: "browser_get_page_text",
  description: "The readable text of the page (what a person sees, without markup), cut at max_chars.",
  params: z.object({
    max_chars: z.number().int().positive().max(10_000_000).default(100_000),
    tab_id: tabParam,
    timeout: timeoutParam,
  }),
  result: pageResult.extend({ text: z.string(), truncated: z.boolean() }),
  deadlineMs: deadline,
  handler: async ({ max_chars, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    // innerText, not textContent: the text as laid out for a reader, without scripts and hidden parts.
    // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is the point here
    const text = await attempt("Reading the page", () => page.locator("body").innerText());
    return { ...(await where(page)), text: text.slice(0, max_chars), truncated: text.length > max_chars };
  },
});

export const browserGetLinks = defineCommand({
  name: "browser_get_links",
  description: "The links of the page: their text and absolute URL, in document order.",
  params: z.object({
    max: z.number().int().positive().max(10_000).default(500),
    tab_id: tabParam,
    timeout: timeoutParam,
  }),
  result: z.object({ links: z.array(z.object({ text: z.string(), href: z.string() })) }),
  deadlineMs: deadline,
  handler: async ({ max, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    const links = await attempt("Reading the links", () =>
      page.$$eval("a[href]", (anchors) =>
        anchors.map((a) => ({
          text: (a.textContent ?? "").trim(),
          href: (a as HTMLAnchorElement).href,
        })),
      ),
    );
    return { links: links.slice(0, max) };
  },
});

export const browserWaitFor = defineCommand({
  name: "browser_wait_for",
  description: "Waits until a CSS selector matches a visible element, or until the page shows a text.",
  params: z
    .object({
      selector: z.string().min(1).max(10_000).optional(),
      text: z.string().min(1).max(10_000).optional(),
      tab_id: tabParam,
      timeout: timeoutParam,
    })
    .refine((p) => (p.selector === undefined) !== (p.text === undefined), {
      message: "give either selector or text",
      path: ["selector"],
    }),
  result: pageResult,
  deadlineMs: deadline,
  handler: async ({ selector, text, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    const locator = selector !== undefined ? page.locator(selector) : page.getByText(text!);
    await attempt(`Waiting for ${selector ?? JSON.stringify(text)}`, () =>
      locator.first().waitFor({ state: "visible" }),
    );
    return where(page);
  },
});

export const browserEvaluate = defineCommand({
  name: "browser_evaluate",
  description:
    "Runs a JavaScript expression in the page and returns its JSON value. Off unless the server was " +
    "started with --browser-evaluate.",
  params: z.object({ expression: z.string().min(1).max(1_000_000), tab_id: tabParam, timeout: timeoutParam }),
  result: z.object({ result: z.unknown() }),
  deadlineMs: deadline,
  handler: async ({ expression, tab_id, timeout }, ctx) => {
    const session = await ctx.browser();
    if (!session.allowEvaluate) {
      throw new CommandError(
        "not_supported",
        "browser_evaluate is off: start the server with --browser-evaluate to let agents run JavaScript in pages",
      );
    }
    const page = await currentPage(ctx, timeout, tab_id);
    return { result: await attempt("The expression", () => page.evaluate(expression)) };
  },
});

export const browserMouse = defineCommand({
  name: "browser_mouse",
  description:
    "Moves the pointer over the page (x,y or the element ref: hovering), presses or releases a button there, " +
    "or drags from there to `to` (press, move, release).",
  params: z.object({
    action: z.enum(["move", "down", "up", "drag"]),
    ...pointParams,
    to: z.object({ x: z.number().finite(), y: z.number().finite() }).nullish().describe("Where a drag ends"),
    button: z.enum(["left", "right", "middle"]).default("left"),
    modifiers: modifiersParam,
    tab_id: tabParam,
    timeout: timeoutParam,
  }),
  result: empty,
  deadlineMs: deadline,
  handler: async ({ action, to, button, modifiers, tab_id, timeout, ...at }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    if (action === "drag" && !to)
      throw new CommandError("invalid_params", "Invalid params: a drag needs `to`");
    const given = at.ref != null || (at.x != null && at.y != null);
    if (!given && action !== "down" && action !== "up") {
      throw new CommandError("invalid_params", "Invalid params: give x and y, or ref");
    }
    const point = given ? await pointOf(page, at) : undefined;
    await holding(page, modifiers, () =>
      attempt("The pointer", async () => {
        if (point) await page.mouse.move(point.x, point.y);
        if (action === "down" || action === "drag") await page.mouse.down({ button });
        if (action === "drag" && to) await page.mouse.move(to.x, to.y, { steps: 10 });
        if (action === "up" || action === "drag") await page.mouse.up({ button });
      }),
    );
    return {};
  },
});

export const browserKey = defineCommand({
  name: "browser_key",
  description:
    "Presses keys in the page: a key, a chord (ctrl+a) or several separated by spaces, `repeat` times; or " +
    "holds one key or chord down for `hold_seconds`.",
  params: z.object({
    keys: z.string().min(1).max(1000).describe("The desktop's key syntax: Return, ctrl+shift+t, Tab Tab"),
    repeat: z.number().int().min(1).max(100).default(1),
    hold_seconds: z.number().min(0).max(30).nullish(),
    tab_id: tabParam,
    timeout: timeoutParam,
  }),
  result: empty,
  deadlineMs: (p) => deadline(p) + (p.hold_seconds ?? 0) * 1000,
  handler: async ({ keys, repeat, hold_seconds, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    if (hold_seconds != null) {
      await holding(page, [keys], () => sleep(hold_seconds * 1000, undefined, { signal: ctx.signal }));
      return {};
    }
    const chords = pageChords(keys);
    await attempt("Pressing keys", async () => {
      for (let i = 0; i < repeat; i++) for (const chord of chords) await page.keyboard.press(chord);
    });
    return {};
  },
});

const MAX_PAGE_CHARS = 1_000_000;

export const browserReadPage = defineCommand({
  name: "browser_read_page",
  description:
    'The page as its accessibility tree, one element a line (`role "name" [ref_N] value=… checked`), each ' +
    "with a ref that other browser commands take; by default the elements in the viewport.",
  params: z.object({
    filter: z
      .enum(["visible", "interactive", "all"])
      .default("visible")
      .describe("visible: in the viewport; interactive: those one can act on; all: off screen too"),
    depth: z.number().int().min(1).max(100).default(15).describe("Levels of elements to read"),
    ref: refParam.nullish().describe("Read this element's part of the page only"),
    max_chars: z.number().int().min(100).max(MAX_PAGE_CHARS).default(50_000),
    tab_id: tabParam,
    timeout: timeoutParam,
  }),
  result: pageResult.extend({ text: z.string() }),
  deadlineMs: deadline,
  handler: async ({ filter, depth, ref, max_chars, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    const text = await attempt("Reading the page", () =>
      PageRefs.of(page).readPage({ filter, depth, ref: ref ?? undefined, maxChars: max_chars }),
    );
    return { ...(await where(page)), text };
  },
});

export const browserFind = defineCommand({
  name: "browser_find",
  description:
    "The page's elements that best match the words of `query` (by role, name and value), best first, each " +
    "a line with its ref, as browser_read_page gives them.",
  params: z.object({
    query: z.string().min(1).max(1000),
    limit: z.number().int().min(1).max(100).default(20),
    tab_id: tabParam,
    timeout: timeoutParam,
  }),
  result: z.object({ text: z.string() }),
  deadlineMs: deadline,
  handler: async ({ query, limit, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    return { text: await attempt("Finding elements", () => PageRefs.of(page).find(query, limit)) };
  },
});

/**
 * Runs in the page with the element as `this`: sets a form field as a person would leave it (text,
 * a checkbox, a choice of a list) and fires its `input` and `change` events; answers what it did or
 * why it could not.
 */
const SET_FIELD = `function (value) {
  const el = this;
  const fire = (...types) => { for (const type of types) el.dispatchEvent(new Event(type, { bubbles: true })); };
  const tag = el.tagName ? el.tagName.toLowerCase() : "";
  if (tag === "input" && (el.type === "checkbox" || el.type === "radio")) {
    const on = typeof value === "boolean" ? value : ["true", "on", "yes", "1", "checked"].includes(String(value).toLowerCase());
    if (el.checked !== on) {
      if (on || el.type === "checkbox") el.click();
      else { el.checked = false; fire("input", "change"); }
    }
    return { done: on ? "checked" : "unchecked", holds: String(el.checked) };
  }
  if (tag === "select") {
    const wanted = String(value).trim();
    const options = Array.from(el.options);
    const option = options.find((o) => o.value === wanted) || options.find((o) => o.text.trim() === wanted)
      || options.find((o) => o.text.trim().toLowerCase() === wanted.toLowerCase());
    if (!option) return { error: "no option " + JSON.stringify(wanted) + " (options: " + options.slice(0, 30).map((o) => JSON.stringify(o.text.trim())).join(", ") + ")" };
    option.selected = true;
    fire("input", "change");
    return { done: "selected " + JSON.stringify(option.text.trim()), holds: option.value };
  }
  if (tag === "input" && el.type === "file") return { error: "a file input: use file_upload" };
  if (tag === "input" || tag === "textarea") {
    const proto = tag === "input" ? HTMLInputElement.prototype : HTMLTextAreaElement.prototype;
    Object.getOwnPropertyDescriptor(proto, "value").set.call(el, String(value));
    fire("input", "change");
    if (el.value !== String(value)) return { error: "the field did not take the value (it holds " + JSON.stringify(el.value) + ")" };
    return { done: "", holds: el.value };
  }
  if (el.isContentEditable) {
    el.focus();
    el.textContent = String(value);
    fire("input");
    return { done: "", holds: el.textContent };
  }
  return { error: "a <" + tag + ">, not a form field" };
}`;

export const browserFormInput = defineCommand({
  name: "browser_form_input",
  description:
    "Sets the form field ref to value (text, true/false for a checkbox, an option's value or text for a list) " +
    "and fires its input and change events.",
  params: z.object({
    ref: refParam,
    value: z.union([z.string().max(100_000), z.number().finite(), z.boolean()]),
    tab_id: tabParam,
    timeout: timeoutParam,
  }),
  result: z.object({ done: z.string(), holds: z.string() }),
  deadlineMs: deadline,
  handler: async ({ ref, value, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    const answer = await PageRefs.of(page).call<{ done: string; holds: string } | { error: string }>(
      ref,
      SET_FIELD,
      value,
    );
    if ("error" in answer) throw new CommandError("failed", `${ref} was not set: ${answer.error}`);
    return answer;
  },
});

export const browserScrollTo = defineCommand({
  name: "browser_scroll_to",
  description: "Scrolls the page until the element ref is in view.",
  params: z.object({ ref: refParam, tab_id: tabParam, timeout: timeoutParam }),
  result: empty,
  deadlineMs: deadline,
  handler: async ({ ref, tab_id, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout, tab_id);
    await PageRefs.of(page).scrollTo(ref);
    return {};
  },
});

export const browserFileUpload = defineCommand({
  name: "browser_file_upload",
  description:
    "Chooses files of this desktop for the file input ref, as its file dialog would; with roots, only files " +
    "inside them (symbolic links followed) are taken.",
  params: z.object({
    ref: refParam,
    paths: z.array(z.string().min(1).max(4096)).min(1).max(100),
    roots: z
      .array(z.string().min(1).max(4096))
      .max(100)
      .nullish()
      .describe("Directories the files must be in (after following links)"),
    tab_id: tabParam,
    timeout: timeoutParam,
  }),
  result: z.object({ files: z.array(z.string()) }),
  deadlineMs: deadline,
  handler: async ({ ref, paths, roots, tab_id, timeout }, ctx) => {
    const files = await Promise.all(paths.map((path) => uploadable(ctx.files, path, roots ?? undefined)));
    const page = await currentPage(ctx, timeout, tab_id);
    const refs = PageRefs.of(page);
    const kind = await refs.call<string>(
      ref,
      "function () { return this.tagName === 'INPUT' && this.type === 'file' ? (this.multiple ? 'many' : 'one') : ''; }",
    );
    if (!kind) throw new CommandError("failed", `${ref} is not a file input`);
    if (kind === "one" && files.length > 1) {
      throw new CommandError("failed", `${ref} takes one file, not ${files.length}`);
    }
    await refs.setFiles(ref, files);
    return { files };
  },
});

/**
 * A file's real path, checked to be a regular file inside one of `roots` (when given), as the
 * desktop's user sees it (`--command-user`: the browser runs as that user and reads the file).
 */
async function uploadable(files: FileSystem, path: string, roots: string[] | undefined): Promise<string> {
  if (!isAbsolute(path))
    throw new CommandError("invalid_params", `Invalid params: paths: not absolute: ${path}`);
  const real = await files.realpath(path).catch(() => {
    throw new CommandError("not_found", `No such file: ${path}`);
  });
  if (!(await files.stat(real)).isFile()) throw new CommandError("failed", `Not a file: ${path}`);
  if (roots) {
    const inside = await Promise.all(
      roots.map(async (root) => {
        const base = await files.realpath(root).catch(() => undefined);
        if (!base) return false;
        const rel = relative(base, real);
        return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
      }),
    );
    if (!inside.includes(true)) {
      throw new CommandError("failed", `Not inside the upload directories: ${path}`);
    }
  }
  return real;
}

const tabResult = z.object({ tab_id: z.string(), url: z.string(), title: z.string(), active: z.boolean() });
const tabOf = async (tab: Tab, active: boolean) => ({ tab_id: tab.id, ...(await where(tab.page)), active });

export const browserTabs = defineCommand({
  name: "browser_tabs",
  description:
    "The browser's open tabs (the active one is the current tab, in front), and with drain_changes what " +
    "happened since the last time (tabs opened, dialogs dismissed).",
  params: z.object({ drain_changes: z.boolean().default(false) }),
  result: z.object({
    tabs: z.array(tabResult),
    changes: z
      .array(
        z.union([
          z.object({ type: z.literal("tab_opened"), tab_id: z.string() }),
          z.object({ type: z.literal("dialog_dismissed"), kind: z.string(), message: z.string() }),
        ]),
      )
      .optional(),
  }),
  handler: async ({ drain_changes }, ctx) => {
    const session = await ctx.browser();
    const open = await session.openTabs();
    const tabs = await Promise.all(open.map(({ tab, current }) => tabOf(tab, current)));
    return drain_changes ? { tabs, changes: session.drainChanges() } : { tabs };
  },
});

export const browserNewTab = defineCommand({
  name: "browser_new_tab",
  description: "Opens a tab (empty, or at url), which becomes the current one.",
  params: z.object({ url: z.string().min(1).max(100_000).nullish(), timeout: timeoutParam }),
  result: tabResult,
  deadlineMs: deadline,
  handler: async ({ url, timeout }, ctx) => {
    const tab = await (await ctx.browser()).newTab();
    tab.page.setDefaultTimeout(timeout * 1000);
    if (url) await attempt(`Opening ${url}`, () => tab.page.goto(url, { waitUntil: "load" }));
    return tabOf(tab, true);
  },
});

export const browserSwitchTab = defineCommand({
  name: "browser_switch_tab",
  description: "Makes a tab the current one and brings it to the front.",
  params: z.object({ tab_id: z.string().min(1).max(40) }),
  result: tabResult,
  handler: async ({ tab_id }, ctx) => tabOf(await (await ctx.browser()).activate(tab_id), true),
});

export const browserCloseTab = defineCommand({
  name: "browser_close_tab",
  description: "Closes a tab; the tab that was current before it is current again.",
  params: z.object({ tab_id: z.string().min(1).max(40) }),
  result: empty,
  handler: async ({ tab_id }, ctx) => {
    await (await ctx.browser()).closeTab(tab_id);
    return {};
  },
});

function logCommand<const N extends "browser_console" | "browser_network">(
  name: N,
  description: string,
  kind: "console" | "network",
) {
  return defineCommand({
    name,
    description,
    params: z.object({ tab_id: tabParam }),
    result: z.object({ lines: z.array(z.string()) }),
    handler: async ({ tab_id }, ctx) => {
      const tab = await (await ctx.browser()).tab(tab_id);
      return { lines: kind === "console" ? tab.log.drainConsole() : tab.log.drainNetwork() };
    },
  });
}

export const browserConsole = logCommand(
  "browser_console",
  "The tab's console messages and uncaught errors since the last time (at most the last 500).",
  "console",
);
export const browserNetwork = logCommand(
  "browser_network",
  "The tab's requests (method, status, URL, kind) since the last time (at most the last 500).",
  "network",
);

export default [
  browserVisitUrl,
  browserClick,
  browserType,
  browserScroll,
  browserWebSearch,
  browserScreenshot,
  browserGetCurrentUrl,
  browserGoBack,
  browserGoForward,
  browserReload,
  browserGetPageText,
  browserGetLinks,
  browserWaitFor,
  browserEvaluate,
  browserMouse,
  browserKey,
  browserReadPage,
  browserFind,
  browserFormInput,
  browserScrollTo,
  browserFileUpload,
  browserTabs,
  browserNewTab,
  browserSwitchTab,
  browserCloseTab,
  browserConsole,
  browserNetwork,
];
