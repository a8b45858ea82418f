/**
 * `POST /cmd` in memory, through `app.request()`: no socket, no server. The same route as over
 * Node's HTTP server (the reply is written by hand, see http/by-hand.ts), so its framing and its
 * bytes can be tried in a unit test.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allCommands } from "../../../../commands/index.js";
import { createComputerApp } from "../../app.js";
import { CommandRegistry } from "../../core/registry.js";

const app = createComputerApp({ registry: new CommandRegistry(allCommands, { checkResults: true }) });
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "hangar-cmd-memory-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

async function cmd(command: string, params?: unknown) {
  const res = await app.request("/cmd", { method: "POST", body: JSON.stringify({ command, params }) });
  const text = await res.text();
  const events = text
    .split("\n\n")
    .filter((chunk) => chunk.startsWith("data: "))
    .map((chunk) => JSON.parse(chunk.slice(6)));
  return { res, text, event: events.at(-1) };
}

describe("POST /cmd through app.request()", () => {
  it("answers a command as an event stream, its fields beside content", async () => {
    const { res, event } = await cmd("version");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(event).toMatchObject({ success: true, content: { protocol: expect.any(Number) } });
    expect(event.protocol).toBe(event.content.protocol);
  });

  it("refuses an unknown command and bad parameters in words", async () => {
    const unknown = await cmd("verison");
    expect(unknown.res.status).toBe(400);
    expect(JSON.parse(unknown.text).detail).toMatch(/Unknown command: verison. Did you mean: version/);
    const bad = await cmd("read_bytes", { path: join(dir, "x"), offset: -1 });
    expect(bad.event).toMatchObject({ success: false, code: "invalid_params" });
    expect(bad.event.error).toMatch(/offset/);
  });

  it("carries bytes both ways: a long base64 chunk in, the same bytes out", async () => {
    const path = join(dir, "chunk.bin");
    const bytes = randomBytes(300 * 1024);
    const written = await cmd("write_bytes", { path, content_b64: bytes.toString("base64") });
    expect(written.event).toMatchObject({ success: true });
    expect((await readFile(path)).equals(bytes)).toBe(true);
    const read = await cmd("read_bytes", { path, offset: 1000, length: 200_000 });
    expect(read.event.content_b64).toBe(bytes.subarray(1000, 201_000).toString("base64"));
    expect(read.event.content.content_b64).toBe(read.event.content_b64);
  });
});
