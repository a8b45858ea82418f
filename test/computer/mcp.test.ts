import { once } from "node:events";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { serve } from "@hono/node-server";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { allCommands } from "../../commands/index.js";
import { createComputerApp } from "../../src/computer/app.js";
import { Bytes, bytesField } from "../../src/computer/core/bytes.js";
import { defineCommand } from "../../src/computer/core/command.js";
import { CommandRegistry } from "../../src/computer/core/registry.js";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startVirtualDisplay } from "../../src/desktop/virtual-display.js";
import { isAlive, waitUntilGone } from "../support/processes.js";
import { startTestServer } from "../support/server.js";

let server: Awaited<ReturnType<typeof startTestServer>>;
let client: Client;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "hangar-mcp-"));
  server = await startTestServer();
  client = new Client({ name: "hangar-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
});
afterAll(async () => {
  await client?.close();
  await server?.close();
  await rm(dir, { recursive: true, force: true });
});

const call = (name: string, args: Record<string, unknown>) =>
  client.callTool({ name, arguments: args }) as Promise<CallToolResult>;
const text = (r: CallToolResult) => (r.content[0] as { type: "text"; text: string }).text;

describe("/mcp (streamable HTTP)", () => {
  it("lists every registry command as a tool with its description and JSON Schema", async () => {
    const { tools } = await client.listTools();
    // Beside the commands, the tools they declare (the computer toolset's members, computer_*).
    const declared = server.registry.tools.map((t) => t.name);
    expect(declared).toContain("computer_left_click");
    expect(tools.map((t) => t.name).sort()).toEqual(
      [...server.registry.commands.map((c) => c.name), ...declared].sort(),
    );
    const run = tools.find((t) => t.name === "run_command")!;
    expect(run.description).toBe(server.registry.resolve("run_command")!.description);
    expect(run.inputSchema.type).toBe("object");
    expect(run.inputSchema.required).toEqual(["command"]);
    expect(Object.keys(run.inputSchema.properties ?? {})).toEqual(
      expect.arrayContaining(["command", "timeout", "cwd", "env"]),
    );
  });

  it("declares object results as outputSchema, and the client's own check accepts what is sent", async () => {
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((t) => [t.name, t]));
    expect(byName.get("run_command")?.outputSchema).toMatchObject({
      type: "object",
      required: expect.arrayContaining(["stdout", "stderr", "return_code"]),
    });
    // Images travel as image content: no structured content, so no outputSchema.
    expect(byName.get("screenshot")?.outputSchema).toBeUndefined();
    expect(tools.filter((t) => t.outputSchema).length).toBeGreaterThan(tools.length / 2);
    // The SDK client validates structured content against the listed outputSchema on every call
    // (and throws when they disagree).
    const path = join(dir, "schema.txt");
    for (const [name, args] of [
      ["version", {}],
      ["run_command", { command: "echo checked" }],
      ["write_text", { path, content: "x" }],
      ["file_exists", { path }],
      ["get_file_size", { path }],
      ["list_dir", { path: dir }],
      ["read_bytes", { path }],
    ] as const) {
      const r = await call(name, args);
      expect(r.isError, name).toBeFalsy();
      if (byName.get(name)?.outputSchema) expect(r.structuredContent, name).toBeDefined();
    }
  });

  it("runs a shell command", async () => {
    const r = await call("run_command", { command: "echo hello from mcp; exit 4" });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toEqual({ stdout: "hello from mcp\n", stderr: "", return_code: 4 });
    expect(JSON.parse(text(r))).toEqual(r.structuredContent);
  });

  it("writes and reads a file", async () => {
    const path = join(dir, "note.txt");
    const written = await call("write_text", { path, content: "ünïcode ✓" });
    expect(written.isError).toBeFalsy();
    expect(await readFile(path, "utf8")).toBe("ünïcode ✓");
    const read = await call("read_text", { path });
    expect(text(read)).toBe("ünïcode ✓");
    const bytes = await call("read_bytes", { path, offset: 0, length: 3 });
    const expected = { content_b64: Buffer.from("ünïcode ✓").subarray(0, 3).toString("base64") };
    expect(bytes.structuredContent).toEqual(expected);
    expect(JSON.parse(text(bytes))).toEqual(expected);
  });

  it("answers an invalid call with a tool error naming the field", async () => {
    const r = await call("run_command", { command: 42 });
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/^Invalid params: command: .*\(invalid_params\)$/);
    const missing = await call("read_text", { path: join(dir, "absent.txt") });
    expect(missing.isError).toBe(true);
    expect(text(missing)).toMatch(/No such file or directory.*absent\.txt \(not_found\)/);
    const unknown = await call("launch_rockets", {});
    expect(unknown.isError).toBe(true);
    expect(text(unknown)).toMatch(/^Unknown command: launch_rockets/);
  });
});

describe("MCP sessions", () => {
  it("give the client a session in which cancelling a call kills its command", async () => {
    const pidFile = join(dir, "cancelled.pid");
    const cancel = new AbortController();
    const pending = client
      .callTool(
        { name: "run_command", arguments: { command: `echo $$ > '${pidFile}'; sleep 30` } },
        undefined,
        {
          signal: cancel.signal,
        },
      )
      .then(
        () => "finished",
        (err: Error) => err.message,
      );
    const deadline = Date.now() + 5000;
    while (!existsSync(pidFile) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const pid = Number(await readFile(pidFile, "utf8"));
    expect(isAlive(pid)).toBe(true);
    cancel.abort();
    expect(await pending).toMatch(/abort/i);
    expect(await waitUntilGone(pid)).toBe(true);
    // The session carries on.
    expect((await call("run_command", { command: "echo still here" })).structuredContent).toMatchObject({
      stdout: "still here\n",
    });
  });

  it("answers an unknown session id with 404", async () => {
    const res = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": "no-such-session",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(res.status).toBe(404);
    expect((await res.json()).error.message).toMatch(/^Session not found/);
  });
});

describe("a client that goes away mid-call", () => {
  it("has its command cancelled: the process is killed", async () => {
    const pidFile = join(dir, "mcp.pid");
    const call = {
      jsonrpc: "2.0",
      id: 1,
      method: "tools/call",
      params: { name: "run_command", arguments: { command: `echo $$ > '${pidFile}'; sleep 30` } },
    };
    const req = request(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    });
    req.on("error", () => undefined);
    req.end(JSON.stringify(call));
    const deadline = Date.now() + 5000;
    while (!existsSync(pidFile) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const pid = Number(await readFile(pidFile, "utf8"));
    expect(isAlive(pid)).toBe(true);
    req.destroy();
    expect(await waitUntilGone(pid)).toBe(true);
  });
});

describe("screenshot over MCP", () => {
  it("comes back as a PNG image of the screen, with its size as text", async () => {
    const display = await startVirtualDisplay({ width: 800, height: 600 });
    const desktop = new DesktopManager({ display: display.display });
    const shooter = await startTestServer({ desktop: desktop.provider });
    const shotClient = new Client({ name: "hangar-test", version: "1.0.0" });
    try {
      await shotClient.connect(new StreamableHTTPClientTransport(new URL(`${shooter.url}/mcp`)));
      const r = (await shotClient.callTool({ name: "screenshot", arguments: {} })) as CallToolResult;
      expect(r.isError).toBeFalsy();
      const [image, rest] = r.content as [{ type: string; data: string; mimeType: string }, { text: string }];
      expect(image).toMatchObject({ type: "image", mimeType: "image/png" });
      const meta = await sharp(Buffer.from(image.data, "base64")).metadata();
      expect([meta.format, meta.width, meta.height]).toEqual(["png", 800, 600]);
      expect(JSON.parse(rest.text)).toMatchObject({ format: "png", width: 800, height: 600 });
    } finally {
      await shotClient.close();
      await shooter.close();
      await desktop.close();
      await display.stop();
    }
  });
});

describe("image results of any command", () => {
  // Any command whose result carries bytes of an image type becomes image content: the transport looks
  // at the result's bytes, not at the command's name. This one encodes a real PNG with sharp.
  const paint = defineCommand({
    name: "paint_square",
    description: "A red square as a PNG (test command)",
    params: z.object({ size: z.number().int().min(1).max(64).default(8) }),
    result: z.object({
      image_data: bytesField("the PNG", { mimeType: "image/png" }),
      format: z.string(),
      width: z.number(),
      height: z.number(),
    }),
    handler: async ({ size }) => {
      const png = await sharp({
        create: { width: size, height: size, channels: 3, background: { r: 255, g: 0, b: 0 } },
      })
        .png()
        .toBuffer();
      return { image_data: new Bytes(png, "image/png"), format: "png", width: size, height: size };
    },
  });

  it("come back as MCP image content with the other fields as text", async () => {
    const registry = new CommandRegistry([...allCommands, paint]);
    const http = serve({ fetch: createComputerApp({ registry }).fetch, hostname: "127.0.0.1", port: 0 });
    await once(http, "listening");
    const { port } = http.address() as AddressInfo;
    const imageClient = new Client({ name: "hangar-test", version: "1.0.0" });
    await imageClient.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
    try {
      const r = (await imageClient.callTool({
        name: "paint_square",
        arguments: { size: 12 },
      })) as CallToolResult;
      const [image, rest] = r.content as [{ type: string; data: string; mimeType: string }, { text: string }];
      expect(image.type).toBe("image");
      expect(image.mimeType).toBe("image/png");
      const meta = await sharp(Buffer.from(image.data, "base64")).metadata();
      expect([meta.format, meta.width, meta.height]).toEqual(["png", 12, 12]);
      expect(JSON.parse(rest.text)).toEqual({ format: "png", width: 12, height: 12 });
    } finally {
      await imageClient.close();
      await new Promise((resolve) => http.close(resolve));
    }
  });
});

describe("hangar mcp (stdio)", () => {
  it("serves the same tools to a client that starts it", async () => {
    const root = fileURLToPath(new URL("../..", import.meta.url));
    const stdioClient = new Client({ name: "hangar-test", version: "1.0.0" });
    await stdioClient.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: ["--import", "tsx", join(root, "test/support/hangar-cli.ts"), "mcp"],
        cwd: root,
        stderr: "pipe",
      }),
    );
    try {
      const { tools } = await stdioClient.listTools();
      expect(tools.map((t) => t.name)).toContain("get_accessibility_tree");
      const r = (await stdioClient.callTool({
        name: "run_command",
        arguments: { command: "printf stdio-ok" },
      })) as CallToolResult;
      expect(r.structuredContent).toMatchObject({ stdout: "stdio-ok", return_code: 0 });
    } finally {
      await stdioClient.close();
    }
  });
});
