/**
 * `GET /commands` and `GET /openapi.json`, generated from the registry's definitions so that they
 * can never disagree with what the server validates.
 */
import { z } from "zod";
import { PACKAGE_VERSION } from "../../common/version.js";
import { base64ParamJsonSchema, isBase64Param } from "./bytes.js";
import type { AnyCommand, AnyParams } from "./command.js";
import type { CommandRegistry } from "./registry.js";

type JsonSchema = Record<string, unknown>;

/**
 * JSON Schema of a definition's parameters (as input: defaults make fields optional). A base64
 * parameter, which also takes bytes decoded in the server, is a base64 string to clients.
 */
export function paramsJsonSchema(def: AnyCommand): JsonSchema {
  return schemaJson(def.params);
}

/** JSON Schema of a parameter object (a command's, or one of its MCP tools'), as `paramsJsonSchema`. */
export function schemaJson(params: AnyParams): JsonSchema {
  return z.toJSONSchema(params, {
    io: "input",
    unrepresentable: "any",
    override: ({ zodSchema, jsonSchema }) => {
      if (Array.isArray(jsonSchema.prefixItems)) return asPlainArray(jsonSchema as JsonSchema);
      if (!isBase64Param(zodSchema)) return;
      const { description } = jsonSchema;
      for (const key of Object.keys(jsonSchema)) delete (jsonSchema as JsonSchema)[key];
      Object.assign(jsonSchema, base64ParamJsonSchema(description));
    },
  }) as JsonSchema;
}

/**
 * A tuple (`[x, y]`) as an array of its items' schema with its length fixed: `prefixItems` with
 * `items: false` is refused by strict MCP clients and by OpenAI's function schemas.
 */
function asPlainArray(schema: JsonSchema) {
  const items = schema.prefixItems as JsonSchema[];
  const texts = new Set(items.map((item) => JSON.stringify(item)));
  delete schema.prefixItems;
  schema.items = texts.size === 1 ? items[0] : { anyOf: items };
  schema.minItems = items.length;
  schema.maxItems = items.length;
}

/** JSON Schema of a definition's result; `draft-7` for validators of that draft (MCP clients' Ajv). */
export function resultJsonSchema(def: AnyCommand, target?: "draft-7"): JsonSchema {
  return z.toJSONSchema(def.result, { io: "output", unrepresentable: "any", target }) as JsonSchema;
}

/** The reference's catalog shape, plus description, JSON Schemas and result shape. */
export function commandCatalog(registry: CommandRegistry) {
  const commands: Record<string, unknown> = {};
  for (const def of registry.commands) {
    const schema = paramsJsonSchema(def);
    const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
    const required = new Set((schema.required ?? []) as string[]);
    commands[def.name] = {
      description: def.description,
      params: Object.entries(properties).map(([name, prop]) => ({
        name,
        required: required.has(name),
        default: prop.default ?? null,
      })),
      ...(def.aliases?.length ? { aliases: def.aliases } : {}),
      schema,
      result: resultJsonSchema(def),
    };
  }
  return { commands, aliases: registry.aliases };
}

/** OpenAPI 3.1 of the HTTP surface: `/cmd` takes one of the commands' request bodies. */
export function openApiDocument(registry: CommandRegistry, extraPaths: Record<string, unknown> = {}) {
  const requests = registry.commands.map((def) => ({
    title: def.name,
    description: def.description,
    type: "object",
    required: ["command"],
    properties: {
      command: { enum: [def.name, ...(def.aliases ?? [])] },
      params: paramsJsonSchema(def),
    },
  }));
  const detail = {
    content: {
      "application/json": { schema: { type: "object", properties: { detail: { type: "string" } } } },
    },
  };
  return {
    openapi: "3.1.0",
    info: { title: "Hangar computer server", version: PACKAGE_VERSION },
    paths: {
      "/status": {
        get: {
          summary: "Liveness and platform; never authenticated",
          responses: {
            200: {
              description: "The server is up",
              content: {
                "application/json": {
                  schema: {
                    type: "object",
                    properties: {
                      status: { const: "ok" },
                      os_type: { enum: ["linux", "darwin", "windows"] },
                      features: { type: "array", items: { type: "string" } },
                    },
                  },
                },
              },
            },
          },
        },
      },
      "/commands": {
        get: { summary: "The command catalog", responses: { 200: { description: "Catalog" } } },
      },
      "/cmd": {
        post: {
          summary: "Run one command; the reply is a text/event-stream of `data: {json}` events",
          requestBody: { required: true, content: { "application/json": { schema: { oneOf: requests } } } },
          responses: {
            200: {
              description: "One event `{success, content|error, ...}` (more with streaming)",
              content: { "text/event-stream": { schema: { type: "string" } } },
            },
            400: { description: "Body not JSON, no command, or unknown command", ...detail },
            401: { description: "Cloud mode: missing or wrong credentials", ...detail },
            413: { description: "Body larger than the server's limit", ...detail },
          },
        },
      },
      ...extraPaths,
    },
  };
}
