/**
 * The activity timeline as programs see it: every transport's commands in `GET /activity` and live
 * on `GET /events`, with their transport, duration and outcome, and secrets redacted.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { allCommands } from "../../commands/index.js";
import { ActivityLog, redact } from "../../src/computer/core/activity.js";
import { Bytes } from "../../src/computer/core/bytes.js";
import { startComputerServer } from "../../src/computer/server.js";
import { TestSocket, wsUrl } from "../support/clients.js";
import { startTestServer } from "../support/server.js";

type Server = Awaited<ReturnType<typeof startTestServer>>;
let server: Server;
beforeAll(async () => {
  server = await startTestServer({ activitySize: 5 });
});
afterAll(() => server.close());

const definition = (name: string) => allCommands.find((def) => def.name === name)!;

const entries = async (url: string, query = "", headers: Record<string, string> = {}) =>
  ((await (await fetch(`${url}/activity${query}`, { headers })).json()) as { entries: any[] }).entries;

describe("GET /activity", () => {
  it("records commands from /cmd, /ws and batch steps with transport, duration and outcome", async () => {
    await server.cmd("version");
    const socket = await TestSocket.open(wsUrl(server.url));
    await socket.request("no_such_command");
    await socket.request("version");
    await socket.close();
    await server.cmd("batch", { commands: [{ command: "version" }] });
    const list = await entries(server.url);
    expect(list.map((e) => [e.transport, e.command, e.success])).toEqual([
      ["http", "version", true],
      ["ws", "version", true],
      ["batch", "version", true],
      ["http", "batch", true],
    ]);
    expect(list[0].ms).toBeGreaterThanOrEqual(0);
    expect(Date.parse(list[0].time)).toBeGreaterThan(Date.now() - 60_000);
    // Only entries after the given id; the ring keeps the newest 5.
    expect((await entries(server.url, `?since=${list[2].id}`)).map((e) => e.command)).toEqual(["batch"]);
    for (let i = 0; i < 6; i++) await server.cmd("version");
    expect(await entries(server.url)).toHaveLength(5);
  });

  it("answers a bad since in words", async () => {
    const res = await fetch(`${server.url}/activity?since=abc`);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ detail: "since: expected an entry id (a whole number)" });
  });

  it("redacts secrets, env values and long text, and records a failure's code", async () => {
    await server.cmd("run_command", {
      command: "true",
      env: { PATH: "/usr/bin", LOGIN: "x" },
      api_key: "sk-live-123",
      timeout: 5,
    });
    await server.cmd("type_text", { text: "a".repeat(5000) });
    await server.cmd("hotkey", { keys: ["ctrl", "c"] });
    const [run, typed, hotkey] = (await entries(server.url)).slice(-3);
    // The keys a person or agent pressed are shown: `key` and `keys` are key names, not secrets.
    expect(hotkey.params).toEqual({ keys: ["ctrl", "c"] });
    expect(run.params.env).toEqual({ PATH: "[redacted]", LOGIN: "[redacted]" });
    expect(run.params.api_key).toBe("[redacted]");
    expect(run.code).toBe("invalid_params");
    expect(typed.params.text).toMatch(/^a{200}… \(5000 characters\)$/);
    expect(redact({ headers: { Authorization: "Bearer x" }, password: 1, nested: [{ token: "t" }] })).toEqual(
      {
        headers: { Authorization: "[redacted]" },
        password: "[redacted]",
        nested: [{ token: "[redacted]" }],
      },
    );
    // Bytes the body reader decoded from base64 are shown as that text would be: cut, with its length.
    const chunk = Buffer.alloc(1024 * 1024, 0xab);
    const text = chunk.toString("base64");
    expect(redact({ content_b64: chunk })).toEqual({
      content_b64: `${text.slice(0, 200)}… (${text.length} characters)`,
    });
    expect(redact({ content_b64: chunk.subarray(0, 6) })).toEqual({ content_b64: "q6urq6ur" });
    expect(redact({ secret: chunk })).toEqual({ secret: "[redacted]" });
    // A parameter nested 100,000 deep is shown to a depth of 8, not followed into a stack overflow.
    let deep: unknown = [];
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(JSON.stringify(redact({ a: deep }))).toBe(`{"a":${"[".repeat(7)}"…"${"]".repeat(7)}}`);
  });

  it("gives a click its point and the screenshot taken before it", () => {
    const log = new ActivityLog({ size: 10, screenshotBytes: 100 });
    /** A run as the registry reports it, with the command's real definition (its flags). */
    const record = (command: string, params: unknown, result: unknown = {}, transport = "mcp") =>
      log.record({
        command,
        flags: definition(command),
        params,
        transport,
        ms: 1,
        outcome: { success: true, result },
      });
    const shot = {
      image_data: new Bytes(Buffer.from("hello"), "image/png"),
      format: "png",
      width: 10,
      height: 10,
      scale: 0.5,
    };
    record("screenshot", {}, shot);
    record("left_click", { x: 4, y: 6 });
    record(
      "drag",
      {
        path: [
          [1, 2],
          [7, 8],
        ],
      },
      {},
      "ws",
    );
    const [taken, click, drag] = log.since();
    expect(taken.screenshot).toBe(taken.id);
    expect(click).toMatchObject({ point: { x: 4, y: 6 }, seen: taken.id });
    expect(drag.point).toEqual({ x: 7, y: 8 });
    expect(log.screenshot(taken.id)?.scale).toBe(0.5);
    // Kept as the image's bytes, which is what GET /activity/screenshots/{id} serves.
    expect(log.screenshot(taken.id)?.bytes.toString()).toBe("hello");
    // Beyond the byte budget the oldest screenshots go.
    for (let i = 0; i < 20; i++) record("screenshot", {}, shot);
    expect(log.screenshot(taken.id)).toBeUndefined();
  });
});

describe("GET /events", () => {
  it("streams each new command as an SSE event", async () => {
    const gone = new AbortController();
    const res = await fetch(`${server.url}/events?since=999999`, { signal: gone.signal });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const reader = res.body!.getReader();
    let text = "";
    await server.cmd("get_screen_size");
    await vi.waitFor(
      async () => {
        text += new TextDecoder().decode((await reader.read()).value);
        expect(text).toMatch(/data: \{[^\n]*"command":"get_screen_size"/);
      },
      { timeout: 5000 },
    );
    gone.abort();
  });
});

describe("cloud mode", () => {
  it("needs the key for the timeline, and never shows the key", async () => {
    const KEY = "sk-hangar-activity-7d1e";
    const cloud = await startComputerServer({
      port: 0,
      cloud: { containerName: "vm", keys: [KEY], limiter: false },
    });
    try {
      const auth = { "x-container-name": "vm", "x-api-key": KEY };
      expect((await fetch(`${cloud.url}/activity`)).status).toBe(401);
      expect((await fetch(`${cloud.url}/events`)).status).toBe(401);
      await fetch(`${cloud.url}/cmd`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ command: "version" }),
      });
      const list = await entries(cloud.url, "", auth);
      expect(list.map((e) => e.command)).toEqual(["version"]);
      expect(JSON.stringify(list)).not.toContain(KEY);
    } finally {
      await cloud.close();
    }
  });
});

describe("memory", () => {
  it("keeps the cut start of a long parameter, not the whole text (100 × 1 MiB of write_bytes)", async () => {
    const { collectGarbage } = await import("../../src/common/idle.js");
    const log = new ActivityLog({ size: 500 });
    const used = () => process.memoryUsage().heapUsed + process.memoryUsage().external;
    collectGarbage();
    const before = used();
    for (let i = 0; i < 100; i++) {
      // A fresh string each time, made by JSON.parse as a request body's is.
      const content = JSON.parse(`"${Buffer.alloc(768 * 1024, i).toString("base64")}"`) as string;
      log.record({
        command: "write_bytes",
        flags: definition("write_bytes"),
        params: { path: "/tmp/x", content_b64: content },
        transport: "http",
        ms: 1,
        outcome: { success: true, result: {} },
      });
    }
    collectGarbage();
    const grown = used() - before;
    expect(log.since().length).toBe(100);
    expect(log.since()[0].params).toMatchObject({
      content_b64: expect.stringContaining("(1048576 characters)"),
    });
    // Kept whole, the texts would hold 100 MiB; cut, a few hundred KiB. The margin is for what else
    // the test process allocates meanwhile (10 MiB was once exceeded by 50 KiB).
    expect(grown).toBeLessThan(25 * 1024 * 1024);
  });
});
