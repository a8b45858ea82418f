/**
 * Parameters are strict on every transport: a misspelled or unknown one is an invalid_params error
 * naming it (with a "did you mean"), never silently dropped; half a point is an error; the
 * ecosystem's common spellings (`coordinate: [x, y]`, `wait` `duration` in seconds) are accepted.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestSocket, wsUrl } from "../support/clients.js";
import { type DesktopServer, startDesktopServer } from "../support/desktop.js";

let desk: DesktopServer;
beforeAll(async () => {
  desk = await startDesktopServer({ width: 800, height: 600 });
});
afterAll(() => desk?.stop());

describe("unknown parameters", () => {
  it("are refused on /cmd with the nearest known name, and nothing happens", async () => {
    await desk.cmd("move_cursor", { x: 10, y: 10 });
    const reply = await desk.cmd("left_click", { X: 300, y: 200 });
    expect(reply).toMatchObject({ success: false, code: "invalid_params" });
    expect(reply.error).toBe(
      "Invalid params: unknown parameter 'X' (did you mean 'x'?) for left_click; it takes: x, y, coordinate, modifiers, verify, verify_ms",
    );
    expect(await desk.pointer()).toEqual({ x: 10, y: 10 });
    const waited = await desk.cmd("wait", { durration: 2 });
    expect(waited.error).toMatch(/unknown parameter 'durration' \(did you mean 'duration'\?\) for wait/);
    const none = await desk.cmd("version", { verbose: true });
    expect(none.error).toBe(
      "Invalid params: unknown parameter 'verbose' for version; it takes no parameters",
    );
  });

  it("are refused on /ws, in batch steps and over MCP alike", async () => {
    const socket = await TestSocket.open(wsUrl(desk.server.url));
    try {
      const reply = await socket.request("run_command", { command: "true", colour: "blue" });
      expect(reply).toMatchObject({ success: false, code: "invalid_params" });
      expect(reply.error).toMatch(/unknown parameter 'colour' for run_command/);
    } finally {
      await socket.close();
    }
    const batch = await desk.cmd("batch", {
      commands: [{ command: "version" }, { command: "get_screen_size", params: { screen: 1 } }],
    });
    expect(batch).toMatchObject({ success: false, code: "invalid_params" });
    expect(batch.error).toMatch(/^Step 2 \(get_screen_size\) failed: .*unknown parameter 'screen'/);
    const mcp = new Client({ name: "strict-test", version: "1.0.0" });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${desk.server.url}/mcp`)));
    try {
      const tool = (await mcp.listTools()).tools.find((t) => t.name === "left_click")!;
      expect(tool.inputSchema.additionalProperties).toBe(false);
      const r = (await mcp.callTool({ name: "wait", arguments: { seconds: 1 } })) as CallToolResult;
      expect(r.isError).toBe(true);
      expect((r.content[0] as { text: string }).text).toMatch(/unknown parameter 'seconds' for wait/);
    } finally {
      await mcp.close();
    }
  });
});

describe("points", () => {
  it("refuses half a point instead of clicking where the pointer is", async () => {
    await desk.cmd("move_cursor", { x: 20, y: 20 });
    for (const params of [{ x: 100 }, { y: 100 }, { x: 100, y: null }]) {
      const reply = await desk.cmd("left_click", params);
      expect(reply).toMatchObject({ success: false, code: "invalid_params" });
      expect(reply.error).toMatch(/x and y go together: give both or neither/);
    }
    expect((await desk.cmd("move_cursor", { x: 5 })).error).toMatch(/x and y go together/);
    expect((await desk.cmd("move_cursor", {})).error).toMatch(/required: x and y \(or coordinate\)/);
    expect(await desk.pointer()).toEqual({ x: 20, y: 20 });
  });

  it("takes coordinate: [x, y] as Anthropic's tool sends it", async () => {
    expect((await desk.cmd("left_click", { coordinate: [321, 234] })).success).toBe(true);
    expect(await desk.pointer()).toEqual({ x: 321, y: 234 });
    expect((await desk.cmd("move_cursor", { coordinate: [111, 99] })).success).toBe(true);
    expect(await desk.pointer()).toEqual({ x: 111, y: 99 });
    const both = await desk.cmd("left_click", { coordinate: [1, 2], x: 1, y: 2 });
    expect(both.error).toMatch(/give either coordinate or x and y, not both/);
    // cua's Python client sends null for a click where the pointer is.
    expect((await desk.cmd("right_click", { x: null, y: null })).success).toBe(true);
    expect(await desk.pointer()).toEqual({ x: 111, y: 99 });
  });
});

describe("wait", () => {
  it("takes duration in seconds or ms in milliseconds, not both", async () => {
    const started = performance.now();
    expect(await desk.cmd("wait", { duration: 0.25 })).toMatchObject({ success: true, waited_ms: 250 });
    expect(performance.now() - started).toBeGreaterThanOrEqual(240);
    expect(await desk.cmd("wait", { ms: 10 })).toMatchObject({ success: true, waited_ms: 10 });
    expect((await desk.cmd("wait", { ms: 10, duration: 1 })).error).toMatch(/either ms or duration/);
    expect((await desk.cmd("wait", { duration: 61 })).code).toBe("invalid_params");
  });
});
