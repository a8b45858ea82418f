/**
 * Trajectories as an agent leaves them: a scripted agent drives `hangar serve --trajectory-dir` over
 * /cmd, /ws and MCP (clicks, typing, a batch, a failure, a secret), the server is killed with
 * SIGKILL, and a new server finds the trajectory on disk complete up to the kill: every line valid
 * against the schema, its screenshots real images, no secret in any file, and the whole of it as one
 * tar archive.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import sharp from "sharp";
import { afterAll, describe, expect, it, vi } from "vitest";
import { parseTrajectoryLine } from "../../src/computer/core/trajectories/trajectories.js";
import { startCli } from "../support/cli-process.js";
import { postCommand, send, TestSocket, wsUrl } from "../support/clients.js";
import { descendants, isRunning } from "../support/processes.js";

const dir = mkdtempSync(join(tmpdir(), "hangar-trajectory-"));
const SECRET = "sk-test-SECRET-4242";
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function serve(trajectories: string) {
  return startCli(
    ["serve", "--port", "0", "--virtual-display", "640x480", "--trajectory-dir", trajectories],
    { ...process.env, HANGAR_LOG_LEVEL: "info", DISPLAY: "" },
  );
}

/** Files under `root` whose bytes contain `text`. */
function filesContaining(root: string, text: string): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .filter((file) => readFileSync(file).includes(text));
}

/** The lines of a steps.jsonl as they are on disk. */
function linesOf(file: string): string[] {
  return readFileSync(file, "utf8").split("\n").filter(Boolean);
}

describe("a scripted agent's trajectory", () => {
  it("is on disk, complete up to a SIGKILL, valid, with its screenshots and without secrets", async () => {
    const trajectories = join(dir, "trajectories");
    const cli = await serve(trajectories);
    const children = descendants(cli.pid);
    const status = (await postCommand(cli.url, "trajectory_status", {})).event;
    expect(status).toMatchObject({ success: true, always: true, dir: trajectories });
    const id: string = status.trajectory.id;
    const steps = join(trajectories, id, "steps.jsonl");

    // The agent: HTTP, then /ws, then MCP (trajectory_status was the first step).
    const sent: string[] = ["trajectory_status"];
    const cmd = async (command: string, params: unknown) => {
      sent.push(command);
      return (await postCommand(cli.url, command, params)).event;
    };
    expect((await cmd("screenshot", { format: "png" })).success).toBe(true);
    expect((await cmd("left_click", { x: 100, y: 120 })).success).toBe(true);
    expect((await cmd("run_command", { command: "true", env: { OPENAI_API_KEY: SECRET } })).success).toBe(
      true,
    );
    const failure = await cmd("read_text", { path: join(dir, "missing.txt") });
    expect(failure).toMatchObject({ success: false, code: "not_found" });
    const batch = await cmd("batch", {
      commands: [
        { command: "move_cursor", params: { x: 10, y: 20 } },
        { command: "screenshot", params: { format: "jpeg", max_width: 320 } },
        { command: "double_click", params: { x: 200, y: 210 } },
      ],
    });
    expect(batch.success).toBe(true);
    // Batch steps finish before their batch.
    sent.splice(sent.length - 1, 0, "move_cursor", "screenshot", "double_click");

    const socket = await TestSocket.open(wsUrl(cli.url));
    expect((await socket.request("type_text", { text: "hello" })).success).toBe(true);
    const refused = await socket.request("press_key", { key: "enter", api_key: SECRET });
    expect(refused.success).toBe(false);
    sent.push("type_text", "press_key");
    await socket.close();

    const mcp = new Client({ name: "trajectory-test", version: "1.0.0" });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(`${cli.url}/mcp`)));
    await mcp.callTool({ name: "right_click", arguments: { x: 300, y: 310 } });
    sent.push("right_click");
    await mcp.close();

    // Written as they happen: every command is on disk before the next one is sent (at most the last
    // may be on its way when the server dies).
    await vi.waitFor(() => expect(linesOf(steps).length).toBe(1 + sent.length), { timeout: 10_000 });
    process.kill(cli.pid, "SIGKILL");
    await vi.waitFor(() => expect(isRunning(cli.pid)).toBe(false), { timeout: 10_000 });
    for (const child of children) if (isRunning(child.pid)) process.kill(child.pid, "SIGKILL");

    const lines = linesOf(steps).map((text) => {
      const parsed = parseTrajectoryLine(text);
      expect(parsed.success, parsed.error?.message).toBe(true);
      return parsed.data!;
    });
    expect(lines[0]).toMatchObject({ type: "start", format: "hangar.trajectory", version: 1, id });
    const stepLines = lines.filter((line) => line.type === "step");
    expect(stepLines.map((s) => s.command)).toEqual(sent);
    expect(stepLines.map((s) => s.step)).toEqual(sent.map((_, i) => i + 1));
    const byCommand = (name: string) => stepLines.filter((s) => s.command === name);
    expect(byCommand("left_click")[0]).toMatchObject({
      client: "http",
      actor: "agent",
      point: { x: 100, y: 120 },
    });
    expect(byCommand("double_click")[0]).toMatchObject({ client: "batch", point: { x: 200, y: 210 } });
    expect(byCommand("type_text")[0]).toMatchObject({
      client: "ws",
      params: { text: "hello" },
      success: true,
    });
    expect(byCommand("right_click")[0]).toMatchObject({ client: "mcp", point: { x: 300, y: 310 } });
    expect(byCommand("read_text")[0]).toMatchObject({ success: false, code: "not_found" });
    expect(byCommand("press_key")[0]).toMatchObject({ success: false, code: "invalid_params" });

    // Clicks say which screenshot the agent had seen: the PNG before the batch, the batch's JPEG after.
    const [png, jpeg] = byCommand("screenshot").map((s) => s.screenshot!);
    expect(png).toMatchObject({ width: 640, height: 480, scale: 1 });
    expect(jpeg).toMatchObject({ width: 320, height: 240, scale: 0.5 });
    expect(byCommand("left_click")[0].seen).toEqual(png);
    expect(byCommand("double_click")[0].seen).toEqual(jpeg);
    for (const shot of [png, jpeg]) {
      const meta = await sharp(join(trajectories, id, shot.file)).metadata();
      expect(meta).toMatchObject({
        width: shot.width,
        height: shot.height,
        format: shot.file.endsWith(".png") ? "png" : "jpeg",
      });
    }
    // No secret anywhere on disk.
    expect(filesContaining(trajectories, SECRET)).toEqual([]);

    // A new server lists it as interrupted and serves it whole.
    const again = await startCli([
      "serve",
      "--port",
      "0",
      "--no-virtual-display",
      "--trajectory-dir",
      trajectories,
    ]);
    try {
      const list = (await (await fetch(`${again.url}/trajectories`)).json()) as {
        trajectories: { id: string; state: string; steps: number }[];
      };
      expect(list.trajectories.find((t) => t.id === id)).toMatchObject({
        state: "interrupted",
        steps: sent.length,
      });
      const tar = await fetch(`${again.url}/trajectories/${id}.tar`);
      expect(tar.status).toBe(200);
      expect(tar.headers.get("content-type")).toBe("application/x-tar");
      const out = join(dir, "unpacked");
      mkdirSync(out);
      execFileSync("tar", ["-xf", "-", "-C", out], { input: Buffer.from(await tar.arrayBuffer()) });
      expect(readFileSync(join(out, id, "steps.jsonl"), "utf8")).toBe(readFileSync(steps, "utf8"));
      expect(readdirSync(join(out, id, "screenshots")).sort()).toEqual(
        readdirSync(join(trajectories, id, "screenshots")).sort(),
      );
      const schema = await (await fetch(`${again.url}/trajectories/schema.json`)).json();
      expect(JSON.stringify(schema)).toContain("hangar.trajectory");
      expect((await send(`${again.url}/trajectories/../etc.tar`)).status).toBe(404);
    } finally {
      await again.stop();
    }
  }, 60_000);
});
