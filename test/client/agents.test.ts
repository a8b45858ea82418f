/**
 * The agent adapters driven by recorded model replies (written from Anthropic's and OpenAI's
 * published computer-tool schemas; no API is reachable), against a real 1280x800 desktop presented
 * to the model as 1024x640: the clicks and keys land in a GTK entry whose text is read back.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  anthropicToolResult,
  computerTool,
  Hangar,
  openaiComputerCallOutput,
} from "../../src/client/index.js";
import { APPS, type DesktopServer, eventually, PYTHON, startDesktopServer } from "../support/desktop.js";
import { type RecordedApi, startRecordedApi } from "../support/recorded-api.js";

const fixture = (name: string) =>
  JSON.parse(readFileSync(join(import.meta.dirname, "fixtures", name), "utf8"));
const display = { width: 1024, height: 640 };

describe("agent adapters on a real desktop", () => {
  let desk: DesktopServer;
  let hangar: Hangar;

  beforeAll(async () => {
    desk = await startDesktopServer({ width: 1280, height: 800 });
    hangar = new Hangar({ url: desk.server.url });
    desk.spawn(PYTHON, [join(APPS, "entry.py"), join(desk.dir, "entry.txt"), "agententry"]);
    const id = await desk.waitForWindow("agententry");
    // The recorded clicks are at model (280, 112): screen (350, 140), inside the entry moved here.
    await desk.run("xdotool", ["windowmove", "--sync", String(id), "100", "100"]);
    await eventually(async () => (await desk.geometry(id)).y >= 100 && (await desk.geometry(id)).x >= 100);
  }, 30_000);
  afterAll(async () => {
    await hangar?.close();
    await desk?.stop();
  });

  it("Anthropic: every tool_use block becomes its tool_result, and the actions happen", async () => {
    const message = fixture("anthropic-message.json");
    const results = [];
    for (const block of message.content) {
      if (block.type === "tool_use") results.push(await anthropicToolResult(hangar, block, { display }));
    }
    expect(results.map((r) => r.tool_use_id)).toEqual(
      message.content.filter((b: { type: string }) => b.type === "tool_use").map((b: { id: string }) => b.id),
    );
    expect(results.every((r) => r.type === "tool_result" && r.is_error === undefined)).toBe(true);
    expect(await eventually(() => desk.read("entry.txt") === "hello from claude")).toBe(true);
    // The screenshot block is a PNG at the declared display size.
    const image = results[0].content[0];
    if (image.type !== "image") throw new Error("expected an image block");
    const meta = await sharp(Buffer.from(image.source.data, "base64")).metadata();
    expect([meta.width, meta.height]).toEqual([1024, 640]);
    // cursor_position: where the click left the pointer, in the model's pixels, then a screenshot.
    expect(results[4].content[0]).toEqual({ type: "text", text: "X=280,Y=112" });
    expect(results[4].content[1]).toMatchObject({ type: "image" });
  });

  it("OpenAI: every computer_call becomes its computer_call_output, safety checks only when acknowledged", async () => {
    const response = fixture("openai-response.json");
    const outputs = [];
    for (const item of response.output) {
      if (item.type === "computer_call") {
        outputs.push(
          await openaiComputerCallOutput(hangar, item, { display, acknowledgeSafetyChecks: true }),
        );
      }
    }
    expect(await eventually(() => desk.read("entry.txt") === "hi from openai")).toBe(true);
    expect(outputs.map((o) => o.call_id)).toEqual([
      "call_zw3Ta3QhGHC5HSzqMW6UA6GH",
      "call_8r7ULqN1eY2n5gSVm1nB9wXk",
      "call_Qm4dT0aWv8HsLr2cFz6yPj3E",
    ]);
    for (const output of outputs) {
      expect(output.type).toBe("computer_call_output");
      expect(output.output).toMatchObject({ type: "computer_screenshot" });
      expect(output.output?.image_url.startsWith("data:image/png;base64,")).toBe(true);
    }
    expect(outputs[0].acknowledged_safety_checks).toBeUndefined();
    expect(outputs[2].acknowledged_safety_checks).toEqual(response.output[3].pending_safety_checks);
    const unacknowledged = await openaiComputerCallOutput(hangar, {
      ...response.output[3],
      action: { type: "wait" },
    });
    expect(unacknowledged.acknowledged_safety_checks).toBeUndefined();
  });

  it("OpenAI GA: a computer_call with a batch of actions becomes one computer_call_output (openai-node 7.5.0 types)", async () => {
    // openai-node 7.5.0: ResponseComputerToolCall.actions?: ComputerActionList; the reply is
    // ResponseInputItem.ComputerCallOutput { call_id, output: { type: 'computer_screenshot', image_url? },
    // type: 'computer_call_output' }.
    const response = fixture("openai-ga-response.json");
    const call = response.output[0];
    const output = await openaiComputerCallOutput(hangar, call, { display });
    expect(await eventually(() => desk.read("entry.txt") === "batched from openai")).toBe(true);
    expect(output).toMatchObject({
      type: "computer_call_output",
      call_id: "call_GA8vQz1nR4tY7uK2mW5xB9cD",
      output: { type: "computer_screenshot" },
    });
    const png = Buffer.from(output.output!.image_url.split(",")[1], "base64");
    const meta = await sharp(png).metadata();
    expect([meta.width, meta.height]).toEqual([1024, 640]);
    // The pointer ended where the batch's last move put it (model 10,10 → screen 13,13).
    expect(await desk.pointer()).toEqual({ x: 13, y: 13 });
  });

  it("AI SDK: execute runs the action, toModelOutput gives text and media parts", async () => {
    const tool = computerTool(hangar, { display });
    await desk.run("xdotool", ["mousemove", "640", "400"]);
    const result = await tool.execute({ action: "cursor_position" });
    const output = tool.toModelOutput(result);
    expect(output.type).toBe("content");
    expect(output.value[0]).toEqual({ type: "text", text: "X=512,Y=320" });
    expect(output.value[1]).toMatchObject({ type: "media", mediaType: "image/png" });
    // A mistake of the model comes back as an error result it can read, not as an exception.
    const wrong = await tool.execute({ action: "left_click", coordinate: [5000, 5] });
    expect(wrong.is_error).toBe(true);
    expect(tool.toModelOutput(wrong).value).toEqual([
      { type: "text", text: "Coordinate (5000, 5) is outside the 1024x640 display." },
    ]);
  });

  describe("the examples, against recorded API replies served on loopback", () => {
    const ROOT = join(import.meta.dirname, "../..");
    let api: RecordedApi;
    let apiUrl: string;
    let requests: RecordedApi["requests"];
    /** Starts a fresh exchange: these replies, no requests yet. */
    const reply = (...replies: unknown[]) => {
      api.requests.length = 0;
      api.replies.splice(0, api.replies.length, ...replies);
    };

    beforeAll(async () => {
      api = await startRecordedApi();
      apiUrl = api.url;
      requests = api.requests;
    });
    afterAll(() => api?.close());

    /** Runs an example as a user would (`npx tsx examples/…`), resolving `hangar/client` to the sources. */
    function runExample(file: string, env: Record<string, string>, answer = "") {
      const child = spawn(process.execPath, ["--conditions=source", "--import", "tsx", join(ROOT, file)], {
        cwd: ROOT,
        env: { ...process.env, HANGAR_URL: desk.server.url, ...env },
        stdio: ["pipe", "pipe", "pipe"],
      });
      let output = "";
      child.stdout.on("data", (chunk) => {
        output += chunk;
        if (output.includes("Proceed?")) child.stdin.end(answer);
      });
      child.stderr.on("data", (chunk) => {
        output += chunk;
      });
      return new Promise<{ code: number | null; output: string }>((resolve) =>
        child.on("close", (code) => resolve({ code, output })),
      );
    }

    it("claude-agent.ts sends the beta header and the tool results back, and acts on the desktop", async () => {
      reply(fixture("anthropic-message.json"), {
        type: "message",
        role: "assistant",
        content: [{ type: "text", text: "Done." }],
        stop_reason: "end_turn",
      });
      const run = await runExample("examples/claude-agent.ts", {
        ANTHROPIC_BASE_URL: apiUrl,
        ANTHROPIC_API_KEY: "sk-test",
      });
      expect(run, run.output).toMatchObject({ code: 0 });
      expect(run.output).toContain("Done.");
      expect(requests.map((r) => r.url)).toEqual(["/v1/messages", "/v1/messages"]);
      expect(requests[0].headers["anthropic-beta"]).toBe("computer-use-2025-01-24");
      expect(requests[0].body.tools[0]).toMatchObject({ type: "computer_20250124", display_width_px: 1280 });
      const results = requests[1].body.messages[2].content;
      expect(results.map((r: { tool_use_id: string }) => r.tool_use_id)).toHaveLength(5);
      expect(results[0].content[0]).toMatchObject({ type: "image", source: { media_type: "image/png" } });
      expect(await eventually(() => desk.read("entry.txt").endsWith("hello from claude"))).toBe(true);
    }, 30_000);

    it("openai-agent.ts asks before acknowledging a safety check, and chains the responses", async () => {
      reply(fixture("openai-response.json"), {
        id: "resp_2",
        output: [{ type: "message", content: [{ type: "output_text", text: "Done." }] }],
      });
      const run = await runExample(
        "examples/openai-agent.ts",
        { OPENAI_BASE_URL: apiUrl, OPENAI_API_KEY: "sk-test" },
        "y\n",
      );
      expect(run, run.output).toMatchObject({ code: 0 });
      expect(run.output).toContain("Check the page before typing.");
      expect(requests[1].body.previous_response_id).toBe("resp_67cc7e3b9d0081909b0cd3b47d1a2b1b");
      const items = requests[1].body.input;
      expect(items.map((i: { type: string }) => i.type)).toEqual(Array(3).fill("computer_call_output"));
      expect(items[2].acknowledged_safety_checks).toEqual([
        expect.objectContaining({ id: "cu_sc_67cc7e55" }),
      ]);
      expect(await eventually(() => desk.read("entry.txt") === "hi from openai")).toBe(true);
    }, 30_000);

    it("the MCP configurations name `hangar mcp` and /mcp, where computer_action is a tool", async () => {
      const desktop = fixtureOf("examples/mcp/claude_desktop_config.json");
      expect(desktop.mcpServers.hangar).toEqual({ command: "hangar", args: ["mcp"] });
      const code = fixtureOf("examples/mcp/claude-code.mcp.json");
      expect(code.mcpServers.hangar).toMatchObject({ type: "http" });
      const url = new URL("/mcp", desk.server.url);
      const client = new Client({ name: "test", version: "1" });
      await client.connect(new StreamableHTTPClientTransport(url));
      try {
        const result = await client.callTool({
          name: "computer_action",
          arguments: { action: { action: "cursor_position" }, display, screenshot: false },
        });
        expect(result.structuredContent).toMatchObject({
          vocabulary: "anthropic",
          text: expect.stringMatching(/^X=\d+,Y=\d+$/),
        });
      } finally {
        await client.close();
      }
    });

    function fixtureOf(path: string) {
      return JSON.parse(readFileSync(join(ROOT, path), "utf8"));
    }
  });
});
