/** The PTY routes as OpenAPI paths, for `/openapi.json` (bodies from the routes' own zod schemas). */
import { z } from "zod";
import { resizeBody, startBody, stdinBody } from "./pty.js";

type Schema = Record<string, unknown>;
const json = (schema: Schema) => ({ content: { "application/json": { schema } } });
const bodyOf = (schema: z.ZodType) => json(z.toJSONSchema(schema, { io: "input" }) as Schema);
const detail = json({ type: "object", properties: { detail: { type: "string" } } });
const size = json({
  type: "object",
  properties: { pid: { type: "integer" }, cols: { type: "integer" }, rows: { type: "integer" } },
});

const pidParameters = [{ name: "pid", in: "path", required: true, schema: { type: "integer" } }];

/** An operation on `/pty/{pid}…`: its success reply, and 404 for an unknown pid. */
function onSession(summary: string, ok: Schema, requestBody?: Schema, okStatus = 200) {
  return {
    summary,
    parameters: pidParameters,
    ...(requestBody ? { requestBody } : {}),
    responses: { [okStatus]: ok, 404: { description: "No such session", ...detail } },
  };
}

const okReply = { description: "`{ok: true}`" };

export const ptyOpenApiPaths = {
  "/pty": {
    post: {
      summary: "Start a terminal session (bash by default)",
      requestBody: bodyOf(startBody),
      responses: { 200: { description: "Started", ...size }, 400: { description: "Bad body", ...detail } },
    },
  },
  "/pty/{pid}": {
    get: onSession("A session's size", { description: "The session", ...size }),
    delete: {
      summary: "Kill a session",
      parameters: pidParameters,
      responses: {
        200: { description: "`{killed: true}`" },
        404: { description: "no session with that pid" },
      },
    },
  },
  "/pty/{pid}/stdin": { post: onSession("Write bytes (base64) to the terminal", okReply, bodyOf(stdinBody)) },
  "/pty/{pid}/resize": { post: onSession("Resize the terminal", okReply, bodyOf(resizeBody)) },
  "/pty/{pid}/stream": {
    get: onSession("Recent output replayed, then live output and the exit code, as Server-Sent Events", {
      description: '`data: {"type":"output","data":base64}` … `data: {"type":"exit","code":N}`',
    }),
  },
  "/pty/{pid}/ws": {
    get: onSession(
      "WebSocket: stdin, resize and disconnect frames in; output and exit frames out",
      { description: "Upgraded" },
      undefined,
      101,
    ),
  },
};
