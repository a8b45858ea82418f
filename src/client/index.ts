/**
 * The typed client of the computer server: `import { Hangar } from "hangar/client"`. One method per
 * command (camelCase of its name: `leftClick`, `computerAction`), whose parameter and result types
 * are those of the command's zod definitions; the definitions are imported as types only, so the
 * client loads none of the server's code.
 *
 * @example
 * const hangar = new Hangar({ url: "http://127.0.0.1:8000" });
 * await hangar.leftClick({ x: 10, y: 20 });
 * const { image_data } = await hangar.screenshot({ format: "jpeg" }, { timeoutMs: 5000 });
 */
import { HangarError, resultOf } from "./errors.js";
import type { CommandName, CommandParams, CommandResult } from "./types.js";
import { WsChannel } from "./ws-channel.js";

export { HangarError, type HangarErrorCode } from "./errors.js";
export type { CommandName, CommandParams, CommandResult } from "./types.js";

type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<CamelCase<Tail>>}`
  : S;

/** One method per command, named in camelCase. */
export type CommandMethods = {
  [N in CommandName as CamelCase<N>]: Record<string, never> extends CommandParams<N>
    ? (params?: CommandParams<N>, options?: CallOptions) => Promise<CommandResult<N>>
    : (params: CommandParams<N>, options?: CallOptions) => Promise<CommandResult<N>>;
};

export interface HangarOptions {
  /** The computer server, e.g. `http://127.0.0.1:8000`. */
  url: string;
  /** `cmd` (default): one `POST /cmd` per call over kept-alive connections; `ws`: one WebSocket. */
  transport?: "cmd" | "ws";
  /** Cloud mode: sent as `X-API-Key` (and in the WebSocket handshake). */
  apiKey?: string;
  /** Cloud mode: sent as `X-Container-Name`. */
  containerName?: string;
  /** Default deadline of a call (default 60 s); the server applies its own as well. */
  timeoutMs?: number;
  /** Extra headers on every `/cmd` request. */
  headers?: Record<string, string>;
}

export interface CallOptions {
  /** This call's deadline, instead of the client's. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** `leftClick` → `left_click`. */
function commandNameOf(method: string): string {
  return method.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** Properties that runtimes probe (`await` looks for `then`): never commands. */
const NOT_COMMANDS = new Set(["then", "toJSON", "constructor"]);

class HangarClient {
  private readonly cmdUrl: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly ws: WsChannel | undefined;

  constructor(options: HangarOptions) {
    const base = options.url.replace(/\/+$/, "");
    this.cmdUrl = `${base}/cmd`;
    this.timeoutMs = options.timeoutMs ?? 60_000;
    this.headers = {
      "content-type": "application/json",
      ...(options.apiKey ? { "x-api-key": options.apiKey } : {}),
      ...(options.containerName ? { "x-container-name": options.containerName } : {}),
      ...options.headers,
    };
    if (options.transport === "ws") {
      const wsUrl = `${base.replace(/^http/, "ws")}/ws`;
      this.ws = new WsChannel(wsUrl, options);
    }
    // Any other property is a command: `hangar.leftClick(params)` is `hangar.call("left_click", params)`.
    // biome-ignore lint/correctness/noConstructorReturn: the methods named after commands come from a proxy
    return new Proxy(this, {
      get(target, property, receiver) {
        if (typeof property !== "string" || property in target || NOT_COMMANDS.has(property))
          return Reflect.get(target, property, receiver);
        const name = commandNameOf(property);
        return (params?: unknown, callOptions?: CallOptions) =>
          target.call(name as CommandName, params as never, callOptions);
      },
    });
  }

  /** Runs a command by name; resolves to its result, rejects with a `HangarError`. */
  async call<N extends CommandName>(
    name: N,
    params?: CommandParams<N>,
    options: CallOptions = {},
  ): Promise<CommandResult<N>> {
    const deadline = AbortSignal.timeout(options.timeoutMs ?? this.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
    try {
      const reply = this.ws
        ? await this.ws.send(name, params ?? {}, signal)
        : await this.viaCmd(name, params ?? {}, signal);
      return reply as CommandResult<N>;
    } catch (err) {
      if (err instanceof HangarError) throw err;
      const ms = options.timeoutMs ?? this.timeoutMs;
      if (deadline.aborted) throw new HangarError("timeout", `${name} did not answer within ${ms / 1000} s`);
      if (signal.aborted) throw new HangarError("cancelled", `${name} was cancelled`);
      throw new HangarError("network", `${name}: ${(err as Error).message}`);
    }
  }

  /** Closes the WebSocket, if any; `/cmd` connections close themselves when idle. */
  async close(): Promise<void> {
    await this.ws?.close();
  }

  private async viaCmd(name: string, params: unknown, signal: AbortSignal): Promise<unknown> {
    const response = await fetch(this.cmdUrl, {
      method: "POST",
      headers: this.headers,
      body: JSON.stringify({ command: name, params }),
      signal,
    });
    const text = await response.text();
    if (!response.ok) {
      let detail = text.slice(0, 500);
      try {
        detail = String(JSON.parse(text).detail ?? detail);
      } catch {}
      throw new HangarError("http", `${name}: HTTP ${response.status}: ${detail}`, {
        status: response.status,
      });
    }
    // The last event is the reply; earlier ones are a streaming command's intermediate output.
    const end = text.trimEnd();
    const start = end.lastIndexOf("\n\ndata: ");
    const event = JSON.parse(end.slice(start < 0 ? 6 : start + 8));
    return resultOf(name, event, event.content);
  }
}

/** The client: `call(name, params)` and one typed method per command. */
export type Hangar = HangarClient & CommandMethods;
export const Hangar = HangarClient as unknown as new (options: HangarOptions) => Hangar;

export {
  type AiSdkToolOutput,
  type AnthropicToolResult,
  anthropicToolResult,
  type ComputerToolOptions,
  computerTool,
  type OpenaiComputerCall,
  type OpenaiComputerCallOutput,
  openaiComputerCallOutput,
} from "./agents.js";
