/**
 * The registry as Model Context Protocol tools: every command is a tool with the same name,
 * description and JSON Schema. Served at `/mcp` (streamable HTTP, see `mcp-http.ts`) and over
 * stdio (`hangar mcp`). Like every transport it knows no command by name: the images of a result
 * (its `Bytes` of an image media type, wherever they are) become image content, and the rest of it
 * JSON text. A result without images is also sent as structured content, and a tool whose results
 * have none declares the command's result schema as `outputSchema` (MCP clients check the one
 * against the other). A definition's `modelDefaults` are the tool's defaults (a screenshot fitted
 * to what models accept). A definition's `tools` (a model's own tool names for the command, e.g. the
 * members of Claude's computer toolset) are listed beside the commands and run through the registry.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  type ImageContent,
  ListToolsRequestSchema,
  type RequestId,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { type Logger, silentLogger } from "../../../common/logger.js";
import { PACKAGE_VERSION } from "../../../common/version.js";
import { Bytes } from "../../core/bytes.js";
import { paramsJsonSchema, resultJsonSchema, schemaJson } from "../../core/catalog.js";
import type { AnyCommand } from "../../core/command.js";
import type { Outcome } from "../../core/outcome.js";
import type { CommandRegistry } from "../../core/registry.js";

const toolCache = new WeakMap<CommandRegistry, Tool[]>();

/** The tools, generated from the registry's definitions (once per registry: it takes milliseconds). */
export function toolList(registry: CommandRegistry): Tool[] {
  let tools = toolCache.get(registry);
  if (!tools) {
    tools = registry.commands.map((def) => {
      const { $schema: _schema, ...inputSchema } = paramsJsonSchema(def);
      withModelDefaults(inputSchema, def);
      return {
        name: def.name,
        description: def.description,
        inputSchema: inputSchema as Tool["inputSchema"],
        ...outputSchema(def),
      };
    });
    for (const tool of registry.tools) {
      const { $schema: _schema, ...inputSchema } = schemaJson(tool.params);
      tools.push({
        name: tool.name,
        description: tool.description,
        inputSchema: inputSchema as Tool["inputSchema"],
      });
    }
    toolCache.set(registry, tools);
  }
  return tools;
}

/** The tool's input schema with the definition's `modelDefaults` as its defaults. */
function withModelDefaults(schema: Record<string, unknown>, def: AnyCommand) {
  const properties = schema.properties as Record<string, Record<string, unknown>> | undefined;
  for (const [name, value] of Object.entries(def.modelDefaults ?? {})) {
    if (properties?.[name]) properties[name] = { ...properties[name], default: value };
  }
}

/**
 * The result schema, for results sent as structured content: objects without images (images travel
 * as image content instead).
 */
function outputSchema(def: AnyCommand): { outputSchema?: Tool["outputSchema"] } {
  const { $schema: _schema, ...schema } = resultJsonSchema(def, "draft-7");
  if (schema.type !== "object" || !schema.properties || mentionsImage(schema)) return {};
  return { outputSchema: schema as Tool["outputSchema"] };
}

/** Whether a JSON Schema has a field of image bytes somewhere (`contentMediaType: image/…`). */
function mentionsImage(schema: unknown): boolean {
  if (typeof schema !== "object" || schema === null) return false;
  const media = (schema as Record<string, unknown>).contentMediaType;
  if (typeof media === "string" && media.startsWith("image/")) return true;
  return Object.values(schema).some(mentionsImage);
}

/**
 * A command's outcome as an MCP tool result: its images as image content, the rest as JSON text
 * (and, without images, as structured content).
 */
export function toolResult(outcome: Outcome): CallToolResult {
  if (!outcome.success) {
    return { isError: true, content: [{ type: "text", text: `${outcome.error} (${outcome.code})` }] };
  }
  const images: ImageContent[] = [];
  const result = takeImages(outcome.result, images, 0);
  const text = typeof result === "string" ? result : JSON.stringify(result ?? null);
  if (images.length > 0) {
    // An answer that was only images (a tool's screenshot) has no text beside them.
    return { content: text === "{}" ? images : [...images, { type: "text", text }] };
  }
  return {
    content: [{ type: "text", text }],
    // Parsed back from the text: structured content is plain JSON (bytes become their base64 text).
    ...(isRecord(result) ? { structuredContent: JSON.parse(text) } : {}),
  };
}

/** Nesting followed when looking for images (results are shallow; this only bounds the walk). */
const DEEPEST = 16;

/** `value` without its image bytes, which are added to `images`. */
function takeImages(value: unknown, images: ImageContent[], depth: number): unknown {
  if (value instanceof Bytes) {
    if (!value.isImage) return value;
    images.push({ type: "image", data: value.data.toString("base64"), mimeType: value.mimeType });
    value.release();
    return undefined;
  }
  if (typeof value !== "object" || value === null || depth >= DEEPEST) return value;
  if (Array.isArray(value)) {
    const kept: unknown[] = [];
    for (const item of value) {
      const left = takeImages(item, images, depth + 1);
      if (left !== undefined || !(item instanceof Bytes)) kept.push(left);
    }
    return kept;
  }
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    const kept = takeImages(item, images, depth + 1);
    if (kept !== undefined) copy[key] = kept;
  }
  return copy;
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
    const { name, arguments: given } = request.params;
    const options = {
      signal: transportSignal ? AbortSignal.any([extra.signal, transportSignal]) : extra.signal,
      transport: "mcp",
      connection: server,
    };
    if (registry.hasTool(name)) return toolResult(await registry.runTool(name, given ?? {}, options));
    const defaults = registry.resolve(name)?.modelDefaults;
    const outcome = await registry.run(name, defaults ? { ...defaults, ...given } : (given ?? {}), options);
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
