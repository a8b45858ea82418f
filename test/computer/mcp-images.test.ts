/**
 * Images over MCP as a model host receives them: image content (never base64 inside JSON text nor
 * a second copy in structured content), a screenshot fitted by default to what model hosts accept
 * (long edge at most 1568 px, at most 1 MB), full size on request, and tool schemas that strict
 * clients accept. Checked with the MCP SDK's client and with the MCP Inspector's CLI, against a
 * 2560x1600 screen showing noise (the worst case for an image's size).
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
import { startTestServer } from "../support/server.js";

const WIDTH = 2560;
const HEIGHT = 1600;
const ONE_MB = 1_000_000;

let display: VirtualDisplay;
let desktop: DesktopManager;
let server: Awaited<ReturnType<typeof startTestServer>>;
let client: Client;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "hangar-mcp-images-"));
  display = await startVirtualDisplay({ width: WIDTH, height: HEIGHT });
  desktop = new DesktopManager({ display: display.display });
  server = await startTestServer({ desktop: desktop.provider });
  const noise = join(dir, "noise.png");
  await sharp(randomBytes(WIDTH * HEIGHT * 3), { raw: { width: WIDTH, height: HEIGHT, channels: 3 } })
    .png({ compressionLevel: 1 })
    .toFile(noise);
  expect((await server.cmd("set_wallpaper", { path: noise })).event).toMatchObject({ success: true });
  client = new Client({ name: "hangar-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)));
}, 120_000);

afterAll(async () => {
  await client?.close();
  await server?.close();
  await desktop?.close();
  await display?.stop();
  await rm(dir, { recursive: true, force: true });
});

type Image = { type: "image"; data: string; mimeType: string };
const call = async (name: string, args: Record<string, unknown>) => {
  const r = (await client.callTool({ name, arguments: args })) as CallToolResult;
  expect(r.isError, JSON.stringify(r.content).slice(0, 300)).toBeFalsy();
  return r;
};
const images = (r: CallToolResult) => r.content.filter((c): c is Image => c.type === "image");
const texts = (r: CallToolResult) =>
  r.content.filter((c): c is { type: "text"; text: string } => c.type === "text").map((c) => c.text);

describe("screenshot over MCP", () => {
  it("is fitted to what model hosts accept by default: long edge ≤ 1568 px, ≤ 1 MB, JPEG", async () => {
    const r = await call("screenshot", {});
    const [image] = images(r);
    const bytes = Buffer.from(image.data, "base64");
    expect(bytes.length).toBeLessThanOrEqual(ONE_MB);
    const meta = await sharp(bytes).metadata();
    expect(Math.max(meta.width!, meta.height!)).toBeLessThanOrEqual(1568);
    expect(image.mimeType).toBe(`image/${meta.format}`);
    expect(meta.format).toBe("jpeg");
    // The text tells the image's size and scale, so points map back to the screen.
    const described = JSON.parse(texts(r)[0]);
    expect(described).toMatchObject({ format: "jpeg", width: meta.width, height: meta.height });
    expect(described.scale).toBeCloseTo(meta.width! / WIDTH, 3);
    expect(r.structuredContent).toBeUndefined();
  });

  it("comes at full size when asked: fit full", async () => {
    const r = await call("screenshot", { fit: "full" });
    const [image] = images(r);
    const bytes = Buffer.from(image.data, "base64");
    const meta = await sharp(bytes).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(["png", WIDTH, HEIGHT]);
    expect(bytes.length).toBeGreaterThan(ONE_MB);
  });

  it("says so in the tool's schema: fit defaults to model over MCP", async () => {
    const { tools } = await client.listTools();
    const shot = tools.find((t) => t.name === "screenshot")!;
    expect(shot.inputSchema.properties?.fit).toMatchObject({ default: "model", enum: ["full", "model"] });
    expect(shot.outputSchema).toBeUndefined();
  });
});

describe("computer_action over MCP", () => {
  it("returns its screenshot as image content, with no base64 in the text nor structured content", async () => {
    for (const action of [
      { action: "mouse_move", coordinate: [100, 100] },
      { type: "move", x: 100, y: 100 },
    ]) {
      const r = await call("computer_action", { action, display: { width: 1280, height: 800 } });
      const [image] = images(r);
      expect(image.mimeType).toBe("image/png");
      const meta = await sharp(Buffer.from(image.data, "base64")).metadata();
      expect([meta.width, meta.height]).toEqual([1280, 800]);
      expect(r.structuredContent).toBeUndefined();
      const [text] = texts(r);
      expect(text.length).toBeLessThan(1000);
      expect(text).not.toContain(image.data.slice(0, 64));
      expect(JSON.parse(text)).toMatchObject({ is_error: false, display: { width: 1280, height: 800 } });
    }
  });
});

describe("tool schemas", () => {
  it("have no tuple spelled as items: false (strict clients refuse it)", async () => {
    const { tools } = await client.listTools();
    const text = JSON.stringify(tools.map((t) => t.inputSchema));
    expect(text).not.toContain('"items":false');
    expect(text).not.toContain("prefixItems");
    const click = tools.find((t) => t.name === "left_click")!;
    expect(JSON.stringify(click.inputSchema.properties?.coordinate)).toContain(
      '"items":{"type":"number"},"minItems":2,"maxItems":2',
    );
  });
});

describe("the MCP Inspector CLI", () => {
  const inspector = (...args: string[]) =>
    promisify(execFile)(
      "npx",
      ["--yes", "@modelcontextprotocol/inspector@2.12.0", "--cli", `${server.url}/mcp`, ...args],
      { maxBuffer: 64 * 1024 * 1024, timeout: 240_000 },
    );

  it("finds no error in the tool schemas under --strict", async () => {
    // Exit 6 (a rejection here) when a schema has an error-severity problem.
    const { stderr } = await inspector("--method", "tools/list", "--strict");
    expect(stderr).toMatch(/\b0 errors\b/);
  }, 300_000);

  it("receives screenshot's and computer_action's images as image content", async () => {
    const shot = JSON.parse(
      (await inspector("--method", "tools/call", "--tool-name", "screenshot")).stdout,
    ) as CallToolResult;
    const bytes = Buffer.from(images(shot)[0].data, "base64");
    expect(bytes.length).toBeLessThanOrEqual(ONE_MB);
    const meta = await sharp(bytes).metadata();
    expect(Math.max(meta.width!, meta.height!)).toBeLessThanOrEqual(1568);

    const action = JSON.parse(
      (
        await inspector(
          "--method",
          "tools/call",
          "--tool-name",
          "computer_action",
          "--tool-arg",
          'action={"action":"screenshot"}',
          "display=auto",
        )
      ).stdout,
    ) as CallToolResult;
    const [image] = images(action);
    expect(image.mimeType).toBe("image/png");
    // `auto` is Anthropic's best size, within what hosts accept (its PNG of noise is not within 1 MB).
    const actionMeta = await sharp(Buffer.from(image.data, "base64")).metadata();
    expect(Math.max(actionMeta.width!, actionMeta.height!)).toBeLessThanOrEqual(1568);
    expect(action.structuredContent).toBeUndefined();
  }, 300_000);
});
