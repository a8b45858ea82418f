/**
 * `hangar/client/openai-agents`: a Hangar desktop as the OpenAI Agents SDK's `Computer`, for
 * `computerTool({ computer: new HangarComputer(url) })`. Each action goes through the server's
 * `computer_action` (OpenAI's vocabulary: its key names, its scroll pixels, the display mapping),
 * the screenshot too. It imports `@openai/agents` for its types only.
 *
 * @example
 * const computer = new HangarComputer("http://127.0.0.1:8000"); // GA `computer` tool (gpt-5.4 …)
 * const agent = new Agent({ name: "desktop", model: "gpt-5.4", tools: [computerTool({ computer })] });
 */
import type { Computer } from "@openai/agents";
import { clientOf, type HangarTarget } from "./connect.js";
import type { CommandParams, Hangar } from "./index.js";

export type { HangarTarget } from "./connect.js";

type Environment = NonNullable<Computer["environment"]>;
type Button = Parameters<Computer["click"]>[2];

export interface HangarComputerOptions {
  /**
   * The size of the screenshots the model sees, in which it gives its coordinates (Hangar scales
   * both ways); default the screen's own size, read at the start of a run.
   */
  display?: { width: number; height: number };
  /** What the model is told the desktop is (default `ubuntu`). */
  environment?: Environment;
}

type OpenaiAction = Record<string, unknown> & { type: string };

export class HangarComputer implements Computer {
  readonly hangar: Hangar;
  environment: Environment;
  /** The display size (width, height); known from the start when given, else after `initRun`. */
  dimensions: [number, number] | undefined;
  private readonly owned: boolean;

  /**
   * @param target the computer server's URL, a `Hangar` client's options, or a `Hangar` client (which
   *   `close()` leaves open; one made here is closed by it)
   */
  constructor(target: HangarTarget, options: HangarComputerOptions = {}) {
    ({ hangar: this.hangar, owned: this.owned } = clientOf(target));
    this.environment = options.environment ?? "ubuntu";
    this.dimensions = options.display ? [options.display.width, options.display.height] : undefined;
  }

  /**
   * A computer whose `dimensions` are known from the start (the screen's size when no display is
   * given), as the preview tool (`computer-use-preview`) needs them.
   */
  static async connect(target: HangarTarget, options: HangarComputerOptions = {}): Promise<HangarComputer> {
    const computer = new HangarComputer(target, options);
    await computer.initRun();
    return computer;
  }

  /** Reads the screen's size when no display size was given. */
  async initRun(): Promise<void> {
    if (this.dimensions) return;
    const { size } = await this.hangar.getScreenSize();
    this.dimensions = [size.width, size.height];
  }

  /** A PNG of the display, base64 (the runner sends it as a `data:image/png` URL). */
  async screenshot(): Promise<string> {
    const output = await this.run({ type: "screenshot" }, true);
    const url = output?.image_url;
    if (!url) throw new Error("computer_action returned no screenshot");
    return url.slice(url.indexOf(",") + 1);
  }

  async click(x: number, y: number, button: Button): Promise<void> {
    await this.run({ type: "click", x, y, button });
  }

  async doubleClick(x: number, y: number): Promise<void> {
    await this.run({ type: "double_click", x, y });
  }

  async scroll(x: number, y: number, scrollX: number, scrollY: number): Promise<void> {
    await this.run({ type: "scroll", x, y, scroll_x: scrollX, scroll_y: scrollY });
  }

  async type(text: string): Promise<void> {
    await this.run({ type: "type", text });
  }

  async wait(): Promise<void> {
    await this.run({ type: "wait" });
  }

  async move(x: number, y: number): Promise<void> {
    await this.run({ type: "move", x, y });
  }

  async keypress(keys: string[]): Promise<void> {
    await this.run({ type: "keypress", keys });
  }

  async drag(path: [number, number][]): Promise<void> {
    await this.run({ type: "drag", path: path.map(([x, y]) => ({ x, y })) });
  }

  /** Closes the client when it was made here. */
  async close(): Promise<void> {
    if (this.owned) await this.hangar.close();
  }

  /** One action through `computer_action`; the server's sentence for the model's mistake is thrown. */
  private async run(action: OpenaiAction, screenshot = false) {
    const params: CommandParams<"computer_action"> = {
      action,
      vocabulary: "openai",
      screenshot,
      ...(this.dimensions ? { display: { width: this.dimensions[0], height: this.dimensions[1] } } : {}),
    };
    const reply = await this.hangar.computerAction(params);
    if (reply.vocabulary !== "openai")
      throw new Error(`unexpected ${reply.vocabulary} reply to an OpenAI action`);
    if (reply.is_error) throw new Error(reply.text ?? `${action.type} failed`);
    return reply.tool_result.output;
  }
}
