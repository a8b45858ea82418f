/**
 * The browser by DOM commands (`browser_*`), also served as cua's `POST /playwright_exec` (its
 * command names without the prefix). The browser is the system's Chromium with a window on this
 * desktop (src/browser/session.ts); coordinates are CSS pixels of the page's viewport.
 */
import { z } from "zod";
import { CommandError } from "../src/common/errors.js";
import { Bytes, bytesField } from "../src/computer/core/bytes.js";
import { type CommandContext, defineCommand } from "../src/computer/core/command.js";

const timeoutParam = z
  .number()
  .positive()
  .max(300)
  .default(30)
  .describe("seconds to wait for the page (navigation, selectors)");
const pageResult = z.object({ url: z.string(), title: z.string() });
const empty = z.object({});
/** A command's deadline: its own timeout, plus the time to start the browser the first time. */
const deadline = (p: { timeout: number }) => p.timeout * 1000 + 30_000;

async function currentPage(ctx: CommandContext, timeout?: number) {
  const page = await (await ctx.browser()).page();
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

const where = async (ctx: CommandContext) => {
  const page = await currentPage(ctx);
  return { url: page.url(), title: await page.title().catch(() => "") };
};

export const browserVisitUrl = defineCommand({
  name: "browser_visit_url",
  description:
    "Opens a URL in the browser's current tab and waits for the page to load; returns its URL and title.",
  params: z.object({ url: z.string().min(1).max(100_000), timeout: timeoutParam }),
  result: pageResult,
  deadlineMs: deadline,
  handler: async ({ url, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout);
    await attempt(`Opening ${url}`, () => page.goto(url, { waitUntil: "load" }));
    return where(ctx);
  },
});

export const browserClick = defineCommand({
  name: "browser_click",
  description: "Clicks at x,y of the page's viewport (CSS pixels).",
  params: z.object({
    x: z.number().finite(),
    y: z.number().finite(),
    button: z.enum(["left", "right", "middle"]).default("left"),
    timeout: timeoutParam,
  }),
  result: pageResult,
  deadlineMs: deadline,
  handler: async ({ x, y, button, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout);
    await attempt("The click", () => page.mouse.click(x, y, { button }));
    return where(ctx);
  },
});

export const browserType = defineCommand({
  name: "browser_type",
  description: "Types text into the element that has the focus in the page.",
  params: z.object({ text: z.string().max(100_000), timeout: timeoutParam }),
  result: empty,
  deadlineMs: deadline,
  handler: async ({ text, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout);
    await attempt("Typing", () => page.keyboard.type(text));
    return {};
  },
});

export const browserScroll = defineCommand({
  name: "browser_scroll",
  description: "Scrolls the page by delta_x, delta_y CSS pixels (positive: right, down).",
  params: z.object({
    delta_x: z.number().finite().default(0),
    delta_y: z.number().finite().default(0),
    timeout: timeoutParam,
  }),
  result: empty,
  deadlineMs: deadline,
  handler: async ({ delta_x, delta_y, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout);
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
    return where(ctx);
  },
});

export const browserScreenshot = defineCommand({
  name: "browser_screenshot",
  description:
    "A PNG of the page's viewport (or the whole page), base64 in `screenshot` as cua's clients read it.",
  params: z.object({ full_page: z.boolean().default(false), timeout: timeoutParam }),
  result: z.object({ screenshot: bytesField("the PNG, base64", { mimeType: "image/png" }) }),
  deadlineMs: deadline,
  handler: async ({ full_page, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout);
    const png = await attempt("The screenshot", () => page.screenshot({ fullPage: full_page, type: "png" }));
    return { screenshot: new Bytes(png, "image/png") };
  },
});

export const browserGetCurrentUrl = defineCommand({
  name: "browser_get_current_url",
  description: "The URL and title of the browser's current tab.",
  params: z.object({}),
  result: pageResult,
  handler: async (_params, ctx) => where(ctx),
});

function historyCommand(name: "browser_go_back" | "browser_go_forward", description: string) {
  return defineCommand({
    name,
    description,
    params: z.object({ timeout: timeoutParam }),
    result: pageResult,
    deadlineMs: deadline,
    handler: async ({ timeout }, ctx) => {
      const page = await currentPage(ctx, timeout);
      await attempt("Going through the history", () =>
        name === "browser_go_back" ? page.goBack() : page.goForward(),
      );
      return where(ctx);
    },
  });
}

export const browserGoBack = historyCommand("browser_go_back", "Goes back one page in the tab's history.");
export const browserGoForward = historyCommand(
  "browser_go_forward",
  "Goes forward one page in the tab's history.",
);

export const browserGetPageText = defineCommand({
  name: "browser_get_page_text",
  description: "The readable text of the page (what a person sees, without markup), cut at max_chars.",
  params: z.object({
    max_chars: z.number().int().positive().max(10_000_000).default(100_000),
    timeout: timeoutParam,
  }),
  result: pageResult.extend({ text: z.string(), truncated: z.boolean() }),
  deadlineMs: deadline,
  handler: async ({ max_chars, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout);
    // innerText, not textContent: the text as laid out for a reader, without scripts and hidden parts.
    // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is the point here
    const text = await attempt("Reading the page", () => page.locator("body").innerText());
    return { ...(await where(ctx)), text: text.slice(0, max_chars), truncated: text.length > max_chars };
  },
});

export const browserGetLinks = defineCommand({
  name: "browser_get_links",
  description: "The links of the page: their text and absolute URL, in document order.",
  params: z.object({ max: z.number().int().positive().max(10_000).default(500), timeout: timeoutParam }),
  result: z.object({ links: z.array(z.object({ text: z.string(), href: z.string() })) }),
  deadlineMs: deadline,
  handler: async ({ max, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout);
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
      timeout: timeoutParam,
    })
    .refine((p) => (p.selector === undefined) !== (p.text === undefined), {
      message: "give either selector or text",
      path: ["selector"],
    }),
  result: pageResult,
  deadlineMs: deadline,
  handler: async ({ selector, text, timeout }, ctx) => {
    const page = await currentPage(ctx, timeout);
    const locator = selector !== undefined ? page.locator(selector) : page.getByText(text!);
    await attempt(`Waiting for ${selector ?? JSON.stringify(text)}`, () =>
      locator.first().waitFor({ state: "visible" }),
    );
    return where(ctx);
  },
});

export const browserEvaluate = defineCommand({
  name: "browser_evaluate",
  description:
    "Runs a JavaScript expression in the page and returns its JSON value. Off unless the server was " +
    "started with --browser-evaluate.",
  params: z.object({ expression: z.string().min(1).max(1_000_000), timeout: timeoutParam }),
  result: z.object({ result: z.unknown() }),
  deadlineMs: deadline,
  handler: async ({ expression, timeout }, ctx) => {
    const session = await ctx.browser();
    if (!session.allowEvaluate) {
      throw new CommandError(
        "not_supported",
        "browser_evaluate is off: start the server with --browser-evaluate to let agents run JavaScript in pages",
      );
    }
    const page = await currentPage(ctx, timeout);
    return { result: await attempt("The expression", () => page.evaluate(expression)) };
  },
});

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
  browserGetPageText,
  browserGetLinks,
  browserWaitFor,
  browserEvaluate,
];
