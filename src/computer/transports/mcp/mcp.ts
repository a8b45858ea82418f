/**
 * The registry as Model Context Protocol tools: every command is a tool with the same name,
 * description and JSON Schema. Served at `/mcp` (streamable HTTP, see `mcp-http.ts`) and over
 * stdio (`hangar mcp`). Like every transport it knows no command by name; a
 * result holding `image_data` and `format` becomes image content, whatever command produced it.
 * Every other object result is also sent as structured content, and its tool declares the
 * command's result schema as `outputSchema` (MCP clients check the one against the other).
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
  type RequestId,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { type Logger, silentLogger } from "../../../common/logger.js";
import { PACKAGE_VERSION } from "../../../common/version.js";
import { paramsJsonSchema, resultJsonSchema } from "../../core/catalog.js";
import type { AnyCommand } from "../../core/command.js";
import type { Outcome } from "../../core/outcome.js";
import type { CommandRegistry } from "../../core/registry.js";

const IMAGE_FORMATS = new Set(["png", "jpeg", "jpg", "webp", "gif"]);

const toolCache = new WeakMap<CommandRegistry, Tool[]>();

/** The tools, generated from the registry's definitions (once per registry: it takes milliseconds). */
export function toolList(registry: CommandRegistry): Tool[] {
  let tools = toolCache.get(registry);
  if (!tools) {
    tools = registry.commands.map((def) => {
      const { $schema: _schema, ...inputSchema } = paramsJsonSchema(def);
      return {
        name: def.name,
        description: def.description,
        inputSchema: inputSchema as Tool["inputSchema"],
        ...outputSchema(def),
      };
    });
    toolCache.set(registry, tools);
  }
  return tools;
}

/**
 * The result schema, for results sent as structured content: objects that are not images (an
 * image's result schema names `image_data`, which travels as image content instead).
 */
function outputSchema(def: AnyCommand): { outputSchema?: Tool["outputSchema"] } {
  const { $schema: _schema, ...schema } = resultJsonSchema(def, "draft-7");
  const properties = schema.properties as Record<string, unknown> | undefined;
  if (schema.type !== "object" || !properties || "image_data" in properties) return {};
  return { outputSchema: schema as Tool["outputSchema"] };
}

/** A command's outcome as an MCP tool result: JSON text (and structured content), or an image. */
export function toolResult(outcome: Outcome): CallToolResult {
  if (!outcome.success) {
    return { isError: true, content: [{ type: "text", text: `${outcome.error} (${outcome.code})` }] };
  }
  const { result } = outcome;
  if (isRecord(result) && typeof result.image_data === "string" && typeof result.format === "string") {
    const format = result.format.toLowerCase();
    if (IMAGE_FORMATS.has(format)) {
      const { image_data, ...rest } = result;
      return {
        content: [
          { type: "image", data: image_data, mimeType: `image/${format === "jpg" ? "jpeg" : format}` },
          { type: "text", text: JSON.stringify(rest) },
        ],
      };
    }
  }
  const text = typeof result === "string" ? result : JSON.stringify(result ?? null);
  return {
    content: [{ type: "text", text }],
    // Parsed back from the text: structured content is plain JSON (a Base64Bytes field becomes its string).
    ...(isRecord(result) ? { structuredContent: JSON.parse(text) } : {}),
  };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * An MCP server whose tools are the registry's commands. A call is cancelled by MCP cancellation,
 * and by `signalOf(requestId)` when given (the HTTP request that carried the call going away).
 */
export function createMcpServer(
  registry: CommandRegistry,
  log: Logger = silentLogger,
  signalOf?: (requestId: RequestId) => AbortSignal | undefined,
): Server {
  const server = new Server(
    { name: "hangar-computer-server", version: PACKAGE_VERSION },
    { capabilities: { tools: {} } },
  );
  const tools = toolList(registry);
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const transportSignal = signalOf?.(extra.requestId);
    const outcome = await registry.run(request.params.name, request.params.arguments ?? {}, {
      signal: transportSignal ? AbortSignal.any([extra.signal, transportSignal]) : extra.signal,
      transport: "mcp",
      connection: server,
    });
    return toolResult(outcome);
  });
  server.onerror = (err) => log.warn({ err }, "mcp protocol error");
  return server;
}

/** Serves the registry over stdin/stdout until stdin closes (desktop agents start `hangar mcp`). */
export async function serveMcpStdio(registry: CommandRegistry, log: Logger = silentLogger): Promise<void> {
  const server = createMcpServer(registry, log);
  const closed = new Promise<void>((resolve) => {
    server.onclose = resolve;
  });
  await server.connect(new StdioServerTransport());
  // The SDK's stdio transport does not notice the end of stdin; the client going away ends the server.
  process.stdin.once("end", () => void server.close());
  await closed;
}
