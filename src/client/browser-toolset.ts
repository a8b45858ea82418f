/**
 * Claude's browser toolset (`browser_toolset_20260801`) on a Hangar desktop's own Chromium (the
 * server's `browser_*` commands): the page the model reads and acts on is the one on the desktop's
 * screen. `read_page` and `find` name elements `ref_N` from the page's accessibility tree, and every
 * member that takes a target takes those refs for as long as the element lives. The SDK's pipeline
 * (`configs`, `urlPolicy`, the file policy, `confirm`, the `browser_state` block) stays the SDK's.
 *
 * @example
 * const browser = new HangarBrowserToolset("http://127.0.0.1:8000", { urlPolicy });
 * const runner = new Anthropic().beta.messages.toolRunner({ model, max_tokens: 4096, tools: [browser], messages });
 */
import { setTimeout as sleep } from "node:timers/promises";
import {
  BetaAbstractBrowserToolset20260801,
  type BetaBrowserNavigateResult,
  type BetaBrowserState,
  type BetaBrowserToolsetOptions,
  type BetaFilePolicy,
  type BetaScreenshotResult,
  type BetaToolsetCallContext,
  ToolError,
} from "@anthropic-ai/sdk/helpers/beta/toolsets";
import type * as Beta from "@anthropic-ai/sdk/resources/beta";
import { clientOf, type HangarTarget } from "./connect.js";
import { type CallOptions, type CommandParams, type Hangar, HangarError } from "./index.js";

export interface HangarBrowserToolsetOptions
  extends Omit<BetaBrowserToolsetOptions, "browserState" | "filePolicy"> {
  /**
   * Directories of the desktop that `file_upload` may take files from (links followed on the
   * desktop). Without them an upload by path is refused. `file_upload` is also off unless `configs`
   * turns it on, and then needs `confirm`.
   */
  uploadRoots?: string[];
}

/** Seconds a `wait` or `hold_key` may last (the members' documented maximum). */
const MAX_SECONDS = 30;
/** Pixels one wheel notch scrolls the page. */
const PIXELS_PER_NOTCH = 100;
/** The most page text one `get_page_text` answers. */
const MAX_PAGE_TEXT = 100_000;

type Target = Beta.BetaBrowserClickTarget;
type Ctx = BetaToolsetCallContext;

export class HangarBrowserToolset extends BetaAbstractBrowserToolset20260801 {
  /** The client every member goes through. */
  readonly hangar: Hangar;
  private readonly owned: boolean;
  private readonly uploadRoots: string[] | undefined;

  /**
   * @param target the computer server's URL, a `Hangar` client's options, or a `Hangar` client (which
   *   stays open at `close()`; a client made here is closed with the toolset)
   */
  constructor(target: HangarTarget, options: HangarBrowserToolsetOptions = {}) {
    const { uploadRoots, ...toolset } = options;
    const { hangar, owned } = clientOf(target);
    super({
      ...toolset,
      browserState: (ctx) => browserState(hangar, ctx),
      ...(uploadRoots ? { filePolicy: desktopFilePolicy(uploadRoots) } : {}),
    });
    this.hangar = hangar;
    this.owned = owned;
    this.uploadRoots = uploadRoots;
  }

  override async close(): Promise<void> {
    await super.close();
    if (this.owned) await this.hangar.close();
  }

  protected override async navigate(
    ctx: Ctx,
    input: Beta.BetaBrowserNavigateInput,
  ): Promise<BetaBrowserNavigateResult> {
    const tab_id = input.tab_id;
    const history = {
      back: "browser_go_back",
      forward: "browser_go_forward",
      reload: "browser_reload",
    } as const;
    const page = Object.hasOwn(history, input.url)
      ? await this.command(ctx, history[input.url as keyof typeof history], { tab_id })
      : await this.command(ctx, "browser_visit_url", { url: addressOf(input.url), tab_id });
    return { url: page.url, title: page.title, ...(page.status != null ? { status: page.status } : {}) };
  }

  protected override async screenshot(
    ctx: Ctx,
    input: Beta.BetaBrowserScreenshotInput,
  ): Promise<BetaScreenshotResult> {
    const { screenshot } = await this.command(ctx, "browser_screenshot", { tab_id: input.tab_id });
    return { data: screenshot, mediaType: "image/png" };
  }

  protected override async zoom(ctx: Ctx, input: Beta.BetaBrowserZoomInput): Promise<BetaScreenshotResult> {
    const region = input.region;
    if (!Array.isArray(region) || region.length !== 4 || !region.every(Number.isFinite)) {
      throw new ToolError("region: expected [x0, y0, x1, y1] in viewport pixels");
    }
    const [x0, y0, x1, y1] = region;
    if (x0 < 0 || y0 < 0 || x1 <= x0 || y1 <= y0)
      throw new ToolError("region: expected 0 <= x0 < x1 and 0 <= y0 < y1");
    const { screenshot } = await this.command(ctx, "browser_screenshot", {
      region: { x: x0, y: y0, width: x1 - x0, height: y1 - y0 },
      tab_id: input.tab_id,
    });
    return { data: screenshot, mediaType: "image/png" };
  }

  protected override left_click(ctx: Ctx, input: Beta.BetaBrowserLeftClickInput) {
    return this.click(ctx, input, "left", 1);
  }
  protected override right_click(ctx: Ctx, input: Beta.BetaBrowserRightClickInput) {
    return this.click(ctx, input, "right", 1);
  }
  protected override middle_click(ctx: Ctx, input: Beta.BetaBrowserMiddleClickInput) {
    return this.click(ctx, input, "middle", 1);
  }
  protected override double_click(ctx: Ctx, input: Beta.BetaBrowserDoubleClickInput) {
    return this.click(ctx, input, "left", 2);
  }
  protected override triple_click(ctx: Ctx, input: Beta.BetaBrowserTripleClickInput) {
    return this.click(ctx, input, "left", 3);
  }

  protected override hover(ctx: Ctx, input: Beta.BetaBrowserHoverInput) {
    return this.mouse(ctx, "move", targetOf(input.target), input.tab_id);
  }
  protected override mouse_move(ctx: Ctx, input: Beta.BetaBrowserMouseMoveInput) {
    return this.mouse(ctx, "move", pointOf(input.target), input.tab_id);
  }
  protected override left_mouse_down(ctx: Ctx, input: Beta.BetaBrowserLeftMouseDownInput) {
    return this.mouse(ctx, "down", pointOf(input.target), input.tab_id);
  }
  protected override left_mouse_up(ctx: Ctx, input: Beta.BetaBrowserLeftMouseUpInput) {
    return this.mouse(ctx, "up", pointOf(input.target), input.tab_id);
  }
  protected override async left_click_drag(
    ctx: Ctx,
    input: Beta.BetaBrowserLeftClickDragInput,
  ): Promise<void> {
    await this.command(ctx, "browser_mouse", {
      action: "drag",
      ...pointOf(input.from, "from"),
      to: pointOf(input.target),
      tab_id: input.tab_id,
    });
  }

  protected override async scroll(ctx: Ctx, input: Beta.BetaBrowserScrollInput): Promise<void> {
    const amount = input.scroll_amount ?? 3;
    if (!Number.isInteger(amount) || amount < 1 || amount > 10)
      throw new ToolError("scroll_amount: expected 1 to 10");
    const notch = { up: [0, -1], down: [0, 1], left: [-1, 0], right: [1, 0] }[input.scroll_direction];
    if (!notch) throw new ToolError("scroll_direction: expected up, down, left or right");
    await this.command(ctx, "browser_scroll", {
      ...pointOf(input.target),
      delta_x: notch[0] * amount * PIXELS_PER_NOTCH,
      delta_y: notch[1] * amount * PIXELS_PER_NOTCH,
      tab_id: input.tab_id,
    });
  }

  protected override async scroll_to(ctx: Ctx, input: Beta.BetaBrowserScrollToInput): Promise<void> {
    await this.command(ctx, "browser_scroll_to", { ref: refOf(input.target), tab_id: input.tab_id });
  }

  protected override async type_(ctx: Ctx, input: Beta.BetaBrowserTypeInput): Promise<void> {
    if (typeof input.text !== "string") throw new ToolError("text: expected a string");
    await this.command(ctx, "browser_type", { text: input.text, tab_id: input.tab_id });
  }

  protected override async key(ctx: Ctx, input: Beta.BetaBrowserKeyInput): Promise<void> {
    await this.command(ctx, "browser_key", {
      keys: input.text,
      repeat: input.repeat ?? 1,
      tab_id: input.tab_id,
    });
  }

  protected override async hold_key(ctx: Ctx, input: Beta.BetaBrowserHoldKeyInput): Promise<void> {
    await this.command(ctx, "browser_key", {
      keys: input.text,
      hold_seconds: seconds(input.duration),
      tab_id: input.tab_id,
    });
  }

  protected override async form_input(
    ctx: Ctx,
    input: Beta.BetaBrowserFormInputInput,
  ): Promise<string | undefined> {
    const { done } = await this.command(ctx, "browser_form_input", {
      ref: refOf(input.target),
      value: input.value,
      tab_id: input.tab_id,
    });
    return done || undefined;
  }

  protected override async read_page(ctx: Ctx, input: Beta.BetaBrowserReadPageInput): Promise<string> {
    const page = await this.command(ctx, "browser_read_page", {
      filter: input.filter ?? "visible",
      ...(input.depth != null ? { depth: input.depth } : {}),
      ...(input.ref ? { ref: input.ref } : {}),
      tab_id: input.tab_id,
    });
    return page.text;
  }

  protected override async find(ctx: Ctx, input: Beta.BetaBrowserFindInput): Promise<string> {
    return (await this.command(ctx, "browser_find", { query: input.query, tab_id: input.tab_id })).text;
  }

  protected override async get_page_text(ctx: Ctx, input: Beta.BetaBrowserGetPageTextInput): Promise<string> {
    const page = await this.command(ctx, "browser_get_page_text", {
      max_chars: MAX_PAGE_TEXT,
      tab_id: input.tab_id,
    });
    return page.truncated ? `${page.text}\n… (the rest of the page is left out)` : page.text;
  }

  protected override async wait(ctx: Ctx, input: Beta.BetaBrowserWaitInput): Promise<void> {
    await sleep(seconds(input.duration) * 1000, undefined, ctx.signal ? { signal: ctx.signal } : {});
  }

  protected override async file_upload(ctx: Ctx, input: Beta.BetaBrowserFileUploadInput): Promise<void> {
    if (input.document_ids?.length)
      throw new ToolError("file_upload takes paths on the desktop, not document_ids");
    if (!input.paths?.length) throw new ToolError("paths: give the files to upload");
    await this.command(ctx, "browser_file_upload", {
      ref: refOf(input.target),
      paths: input.paths,
      ...(this.uploadRoots ? { roots: this.uploadRoots } : {}),
      tab_id: input.tab_id,
    });
  }

  protected override async read_console(ctx: Ctx, input: Beta.BetaBrowserReadConsoleInput): Promise<string> {
    const { lines } = await this.command(ctx, "browser_console", { tab_id: input.tab_id });
    return lines.length ? lines.join("\n") : "(no console messages since the last read)";
  }

  protected override async read_network(ctx: Ctx, input: Beta.BetaBrowserReadNetworkInput): Promise<string> {
    const { lines } = await this.command(ctx, "browser_network", { tab_id: input.tab_id });
    return lines.length ? lines.join("\n") : "(no requests since the last read)";
  }

  protected override async javascript_exec(
    ctx: Ctx,
    input: Beta.BetaBrowserJavascriptExecInput,
  ): Promise<string> {
    const { result } = await this.command(ctx, "browser_evaluate", {
      expression: input.text,
      tab_id: input.tab_id,
    });
    return result === undefined ? "undefined" : JSON.stringify(result);
  }

  protected override async new_tab(
    ctx: Ctx,
    _input: Beta.BetaBrowserNewTabInput,
  ): Promise<Beta.BetaBrowserStateTabEntry> {
    return this.command(ctx, "browser_new_tab", {});
  }

  protected override async list_tabs(
    ctx: Ctx,
    _input: Beta.BetaBrowserListTabsInput,
  ): Promise<Beta.BetaBrowserStateTabEntry[]> {
    return (await this.command(ctx, "browser_tabs", {})).tabs;
  }

  protected override async switch_tab(
    ctx: Ctx,
    input: Beta.BetaBrowserSwitchTabInput,
  ): Promise<Beta.BetaBrowserStateTabEntry> {
    return this.command(ctx, "browser_switch_tab", { tab_id: input.tab_id });
  }

  protected override async close_tab(ctx: Ctx, input: Beta.BetaBrowserCloseTabInput): Promise<void> {
    await this.command(ctx, "browser_close_tab", { tab_id: input.tab_id });
  }

  private async mouse(
    ctx: Ctx,
    action: "move" | "down" | "up",
    at: { x: number; y: number } | { ref: string },
    tabId: string | null | undefined,
  ): Promise<void> {
    await this.command(ctx, "browser_mouse", { action, ...at, tab_id: tabId });
  }

  private async click(
    ctx: Ctx,
    input: Beta.BetaBrowserLeftClickInput,
    button: "left" | "right" | "middle",
    clicks: number,
  ): Promise<void> {
    await this.command(ctx, "browser_click", {
      ...targetOf(input.target),
      button,
      click_count: clicks,
      modifiers: input.modifiers ? input.modifiers.split("+").filter(Boolean) : [],
      tab_id: input.tab_id,
    });
  }

  /** One command for the model: the server's refusal or failure becomes the model's error text. */
  private command<N extends Parameters<Hangar["call"]>[0]>(ctx: Ctx, name: N, params: CommandParams<N>) {
    return callForModel(this.hangar, name, params, ctx.signal ? { signal: ctx.signal } : {});
  }
}

async function callForModel<N extends Parameters<Hangar["call"]>[0]>(
  hangar: Hangar,
  name: N,
  params: CommandParams<N>,
  options: CallOptions,
) {
  try {
    return await hangar.call(name, params, options);
  } catch (err) {
    if (err instanceof HangarError) throw new ToolError(err.message.replace(/^Invalid params: /, ""));
    throw err;
  }
}

/** The tabs for the SDK's `browser_state` block, and what changed since the last call. */
async function browserState(hangar: Hangar, ctx: Ctx): Promise<BetaBrowserState> {
  try {
    const { tabs, changes } = await hangar.browserTabs(
      { drain_changes: true },
      ctx.signal ? { signal: ctx.signal } : {},
    );
    return { tabs, state_changes: changes ?? [] };
  } catch (err) {
    // No browser (none installed, no display): no tabs, and every member says why.
    if (err instanceof HangarError && err.code !== "cancelled") return { tabs: [] };
    throw err;
  }
}

/**
 * The address `navigate` opens: `https://` when it names no scheme; http(s) and `about:blank` only
 * (no `javascript:`, `data:`, `file:` or `view-source:` from a page's words).
 */
function addressOf(url: string): string {
  if (typeof url !== "string" || /[\s\p{Cc}]/u.test(url)) {
    throw new ToolError("url: expected an address without spaces or control characters");
  }
  if (url === "about:blank") return url;
  const full = /^[a-z][a-z0-9+.-]*:/i.test(url) && !/^[^:/]+:\d+(\/|$)/.test(url) ? url : `https://${url}`;
  let parsed: URL;
  try {
    parsed = new URL(full);
  } catch {
    throw new ToolError("url: not an address");
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new ToolError("navigate opens http and https addresses only");
  }
  return full;
}

/** A click target as the server's parameters: `{x, y}` or `{ref}`. */
function targetOf(target: Target): { x: number; y: number } | { ref: string } {
  if (target?.type === "ref") return { ref: refOf(target) };
  return pointOf(target);
}

function pointOf(
  target: Beta.BetaBrowserCoordinateTarget | Target,
  field = "target",
): { x: number; y: number } {
  if (target?.type !== "coordinate" || !Number.isFinite(target.x) || !Number.isFinite(target.y)) {
    throw new ToolError(`${field}: expected {"type": "coordinate", "x", "y"} in viewport pixels`);
  }
  return { x: target.x, y: target.y };
}

function refOf(target: Target | Beta.BetaBrowserRefTarget): string {
  if (target?.type !== "ref" || typeof target.ref !== "string") {
    throw new ToolError('target: expected {"type": "ref", "ref": "ref_N"} from read_page or find');
  }
  return target.ref;
}

function seconds(duration: unknown): number {
  if (typeof duration !== "number" || !Number.isFinite(duration) || duration < 0 || duration > MAX_SECONDS) {
    throw new ToolError(`duration: expected 0 to ${MAX_SECONDS} seconds`);
  }
  return duration;
}

/**
 * Uploads only from `roots`, directories of the desktop: a path is checked here by its words (it
 * must be absolute and inside a root), and again on the desktop with links followed
 * (`browser_file_upload`'s `roots`). Document ids are refused; download paths are never shown.
 */
function desktopFilePolicy(roots: string[]): BetaFilePolicy {
  const bases = roots.map((root) => root.replace(/\/+$/, ""));
  return {
    resolveUploadPaths(_ctx, paths) {
      for (const path of paths) {
        const inside =
          path.startsWith("/") &&
          !path.split("/").includes("..") &&
          bases.some((b) => path.startsWith(`${b}/`));
        if (!inside) throw new ToolError("file_upload may take files from the upload directories only");
      }
      return paths;
    },
    resolveUploadDocuments() {
      throw new ToolError("file_upload takes paths on the desktop, not document_ids");
    },
    isPathVisible: () => false,
  };
}
