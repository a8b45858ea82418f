import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startTestServer } from "../support/server.js";

let server: Awaited<ReturnType<typeof startTestServer>>;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

describe("POST /cmd", () => {
  it("answers version as one event-stream event with content and the cua fields", async () => {
    const r = await server.cmd("version");
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(r.text.startsWith("data: ")).toBe(true);
    expect(r.text.endsWith("\n\n")).toBe(true);
    expect(r.events).toHaveLength(1);
    expect(r.event).toEqual({
      success: true,
      content: { protocol: 1, package: expect.any(String) },
      protocol: 1,
      package: expect.any(String),
    });
    expect(r.event.package).not.toBe("");
  });

  it("parses as one JSON document after the first 'data: ' as cua's Python client does", async () => {
    const r = await server.cmd("version");
    expect(JSON.parse(r.text.trim().slice(6)).success).toBe(true);
  });

  it("rejects a body that is not JSON with 400 and a detail", async () => {
    const res = await fetch(`${server.url}/cmd`, { method: "POST", body: "{nope" });
    expect(res.status).toBe(400);
    expect((await res.json()).detail).toMatch(/^Invalid JSON body/);
  });

  it.each([["[1,2]"], ["42"], ['"version"'], ["null"]])("rejects the non-object body %s", async (body) => {
    const res = await fetch(`${server.url}/cmd`, { method: "POST", body });
    expect(res.status).toBe(400);
    expect((await res.json()).detail).toMatch(/expected an object/);
  });

  it("requires a command", async () => {
    for (const body of [{}, { command: "" }, { command: 5 }, { params: {} }]) {
      const res = await fetch(`${server.url}/cmd`, { method: "POST", body: JSON.stringify(body) });
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ detail: "Command is required" });
    }
  });

  it("suggests near names for an unknown command", async () => {
    const res = await fetch(`${server.url}/cmd`, {
      method: "POST",
      body: JSON.stringify({ command: "versoin" }),
    });
    expect(res.status).toBe(400);
    expect((await res.json()).detail).toBe("Unknown command: versoin. Did you mean: version?");
  });

  it("treats null or absent params as empty and rejects arrays and strings with invalid_params", async () => {
    expect((await server.cmd("version", null)).event.success).toBe(true);
    expect((await server.cmd("version")).event.success).toBe(true);
    for (const params of [[1], "x", 7]) {
      const r = await server.cmd("version", params);
      expect(r.status).toBe(200);
      expect(r.event).toMatchObject({ success: false, code: "invalid_params" });
      expect(r.event.error).toMatch(/expected an object/);
    }
  });

  it("answers 413 with a clear message above the body limit and keeps serving", async () => {
    const small = await startTestServer({ bodyLimitBytes: 1024 * 1024 });
    try {
      const huge = new Uint8Array(100 * 1024 * 1024).fill(0x20);
      const res = await fetch(`${small.url}/cmd`, { method: "POST", body: huge as BodyInit });
      expect(res.status).toBe(413);
      expect((await res.json()).detail).toMatch(/too large.*1 MiB/);
      expect((await small.cmd("version")).event.success).toBe(true);
    } finally {
      await small.close();
    }
  });

  it("survives random bytes and deeply nested JSON", async () => {
    const random = new Uint8Array(4096).map(() => Math.floor(Math.random() * 256));
    expect((await fetch(`${server.url}/cmd`, { method: "POST", body: random as BodyInit })).status).toBe(400);
    const deep = `{"command":"version","params":{"a":${"[".repeat(100_000)}${"]".repeat(100_000)}}}`;
    const r = await fetch(`${server.url}/cmd`, { method: "POST", body: deep });
    expect(r.status).toBeLessThan(500);
    expect((await server.cmd("version")).event.success).toBe(true);
  });
});

describe("catalog", () => {
  it("GET /status is ok with the os type", async () => {
    const body = await (await fetch(`${server.url}/status`)).json();
    expect(body).toEqual({
      status: "ok",
      os_type: "linux",
      features: expect.any(Array),
      unsupported: ["diorama_cmd", "/responses"],
    });
    expect(body.features).toEqual(expect.arrayContaining(["batch", "ws", "pty", "mcp", "stream"]));
  });

  it("GET /commands lists every command with params and aliases", async () => {
    const body = await (await fetch(`${server.url}/commands`)).json();
    expect(body.aliases).toMatchObject({ shell: "run_command", ls: "list_dir", rm: "delete_file" });
    expect(body.commands.run_command.aliases).toEqual(["shell", "exec"]);
    expect(body.commands.run_command.params).toContainEqual({
      name: "command",
      required: true,
      default: null,
    });
    expect(body.commands.read_bytes.params).toContainEqual({ name: "offset", required: false, default: 0 });
    expect(body.commands.read_bytes.result.properties.content_b64).toMatchObject({
      type: "string",
      contentEncoding: "base64",
    });
  });

  it("GET /openapi.json is OpenAPI 3.1 with one request body per command", async () => {
    const doc = await (await fetch(`${server.url}/openapi.json`)).json();
    expect(doc.openapi).toBe("3.1.0");
    const oneOf = doc.paths["/cmd"].post.requestBody.content["application/json"].schema.oneOf;
    expect(oneOf.map((s: { title: string }) => s.title)).toContain("write_bytes");
  });

  it("answers unknown routes with a JSON 404", async () => {
    const res = await fetch(`${server.url}/nope`);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: "Not Found" });
  });
});

/** The timeline's entries (GET /activity). */
async function activity(): Promise<Array<{ command: string; code?: string; ms: number }>> {
  return (await (await fetch(`${server.url}/activity`)).json()).entries;
}

describe("POST /cmd in Node's request listener, before the app", () => {
  it("is answered with a query string too; other methods on /cmd and /cmd/ go on to the app", async () => {
    const r = await fetch(`${server.url}/cmd?from=test`, { method: "POST", body: '{"command":"version"}' });
    expect(r.status).toBe(200);
    expect(await r.text()).toMatch(/^data: \{"success":true,"content":\{"protocol":1/);
    const get = await fetch(`${server.url}/cmd`);
    expect(get.status).toBe(404);
    expect(await get.json()).toEqual({ detail: "Not Found" });
    const slash = await fetch(`${server.url}/cmd/`, { method: "POST", body: '{"command":"version"}' });
    expect(slash.status).toBe(404);
  });

  it("sends the headers of a command still running before its reply", async () => {
    const res = await fetch(`${server.url}/cmd`, {
      method: "POST",
      body: JSON.stringify({ command: "run_command", params: { command: "sleep 0.6; echo done" } }),
    });
    const headersAt = Date.now();
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const text = await res.text();
    expect(Date.now() - headersAt).toBeGreaterThanOrEqual(300);
    expect(JSON.parse(text.slice(6))).toMatchObject({ success: true, stdout: "done\n" });
  });

  it("cancels a command whose client went away at once, before its headers were due", async () => {
    const before = (await activity()).length;
    const body = JSON.stringify({ command: "run_command", params: { command: "sleep 30" } });
    const { port } = new URL(server.url);
    const socket = connect(Number(port), "127.0.0.1");
    socket.on("error", () => {});
    // The request and the end of the connection in one go: the server sees both before the command's
    // headers are due.
    socket.end(
      `POST /cmd HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    await vi.waitFor(
      async () => {
        const entry = (await activity()).slice(before).find((e) => e.command === "run_command");
        expect(entry).toMatchObject({ code: "cancelled" });
        expect(entry?.ms).toBeLessThan(5000);
      },
      { timeout: 10_000, interval: 100 },
    );
  });
});
