/**
 * Random commands, params and frames against /cmd and /ws (fast-check, bounded runs): the server
 * never crashes, never answers 5xx, always answers in its documented shapes, and still serves valid
 * requests afterwards. Only commands without side effects outside a temp dir are fuzzed by name.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningComputerServer, startComputerServer } from "../../src/computer/server.js";
import { noDesktop } from "../../src/desktop/backend.js";
import { send, TestSocket, wsUrl } from "../support/clients.js";

const SAFE = [
  "version",
  "file_exists",
  "directory_exists",
  "list_dir",
  "ls",
  "read_text",
  "read_file",
  "read_bytes",
  "get_file_size",
  "batch",
  "run_command",
];
const SAFE_SHELL = ["true", "echo fuzz", "exit 3", "printf '%s' é"];

let server: RunningComputerServer;
const dir = mkdtempSync(join(tmpdir(), "hangar-fuzz-"));
beforeAll(async () => {
  writeFileSync(join(dir, "a.txt"), "hello");
  server = await startComputerServer({ port: 0, desktop: noDesktop });
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

/** True when any string inside would name a command outside the safe list (e.g. in a batch). */
function namesUnsafeCommand(value: unknown): boolean {
  if (typeof value === "string") {
    const def = server.registry.resolve(value);
    return def !== undefined && !SAFE.includes(def.name) && !SAFE.includes(value);
  }
  if (Array.isArray(value)) return value.some(namesUnsafeCommand);
  if (value && typeof value === "object")
    return Object.entries(value).some(([k, v]) => namesUnsafeCommand(k) || namesUnsafeCommand(v));
  return false;
}

const pathArb = fc.oneof(
  fc.constant(join(dir, "a.txt")),
  fc.constantFrom("~", "/", "", "\0x", "../..", "/proc/self/status"),
  fc.string(),
);
const paramsArb = fc.oneof(
  fc.dictionary(
    fc.constantFrom("path", "offset", "length", "commands", "timeout", "cwd", "env", "x", "ms"),
    fc.oneof(fc.jsonValue(), pathArb),
  ),
  fc.jsonValue(),
  fc.constant(undefined),
);
const commandArb = fc.oneof(
  fc.constantFrom(...SAFE),
  fc.string({ maxLength: 40 }),
  fc.constantFrom("", "authenticate", "Version", "ver"),
);
const requestArb = fc
  .record({ command: commandArb, params: paramsArb })
  .map((r) =>
    r.command === "run_command"
      ? {
          ...r,
          params: {
            ...(typeof r.params === "object" && r.params && !Array.isArray(r.params) ? r.params : {}),
            command: SAFE_SHELL[r.command.length % SAFE_SHELL.length],
            cwd: undefined,
          },
        }
      : r,
  )
  .filter((r) => !namesUnsafeCommand(r));

/** A raw /cmd body or /ws frame: a request, any JSON, any text, or bytes. */
const frameArb = fc.oneof(
  { weight: 4, arbitrary: requestArb.map((r) => JSON.stringify(r)) },
  {
    weight: 1,
    arbitrary: fc
      .jsonValue()
      .filter((v) => !namesUnsafeCommand(v))
      .map((v) => JSON.stringify(v)),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)) },
);

describe("fuzzing", () => {
  it("POST /cmd: only 200 with one parseable data: event, or a 4xx with a detail", async () => {
    await fc.assert(
      fc.asyncProperty(frameArb, async (body) => {
        if (typeof body === "string" && namesUnsafeCommand(safeParse(body))) return;
        const r = await send(`${server.url}/cmd`, { body, headers: { "content-type": "application/json" } });
        expect(r.status).toBeLessThan(500);
        if (r.status === 200) {
          expect(r.text.startsWith("data: ")).toBe(true);
          const event = JSON.parse(r.text.trim().slice(6));
          expect(typeof event.success).toBe("boolean");
          if (!event.success) expect(event.error).toEqual(expect.any(String));
        } else {
          expect(r.status).toBeGreaterThanOrEqual(400);
          expect(r.json().detail).toEqual(expect.any(String));
        }
      }),
      { numRuns: 200 },
    );
    expect((await send(`${server.url}/cmd`, { body: '{"command":"version"}' })).status).toBe(200);
  });

  it("WS /ws: exactly one reply per frame with success and, on failure, an error; the socket stays open", async () => {
    const ws = await TestSocket.open(wsUrl(server.url));
    await fc.assert(
      fc.asyncProperty(frameArb, async (frame) => {
        if (typeof frame === "string" && namesUnsafeCommand(safeParse(frame))) return;
        ws.sendRaw(frame, Buffer.isBuffer(frame));
        const reply = await ws.next();
        expect(typeof reply.success).toBe("boolean");
        if (!reply.success) expect(reply.error).toEqual(expect.any(String));
      }),
      { numRuns: 200 },
    );
    expect(await ws.request("version")).toMatchObject({ success: true, protocol: 1 });
    await ws.close();
  });
});

describe("fuzzing cloud auth", () => {
  it("random credentials and handshakes get 401, 429 or in, never a 5xx, and the right key still works", async () => {
    const cloud = await startComputerServer({
      port: 0,
      desktop: noDesktop,
      cloud: { containerName: "vm-fuzz", keys: ["sk-fuzz-right"], limiter: { burst: 20, refillMs: 1000 } },
    });
    const header = fc.oneof(
      fc.constantFrom("vm-fuzz", "sk-fuzz-right", "Bearer sk-fuzz-right", ""),
      fc.string({ unit: "binary-ascii", maxLength: 60 }).map((t) => t.replace(/[^\x20-\x7e]/g, "")),
    );
    try {
      await fc.assert(
        fc.asyncProperty(
          fc.record({ name: header, key: header, authorization: header }, { requiredKeys: [] }),
          frameArb,
          async (h, frame) => {
            const headers: Record<string, string> = {};
            if (h.name !== undefined) headers["X-Container-Name"] = h.name;
            if (h.key !== undefined) headers["X-API-Key"] = h.key;
            if (h.authorization !== undefined) headers.Authorization = h.authorization;
            const r = await send(`${cloud.url}/cmd`, { body: '{"command":"version"}', headers });
            expect([200, 401, 429]).toContain(r.status);
            const ws = await TestSocket.open(wsUrl(cloud.url));
            ws.sendRaw(typeof frame === "string" ? frame : frame, Buffer.isBuffer(frame));
            const reply = await ws.next();
            expect(reply === undefined || typeof reply.success === "boolean").toBe(true);
            ws.ws.terminate();
          },
        ),
        { numRuns: 100 },
      );
      const ok = await send(`${cloud.url}/cmd`, {
        body: '{"command":"version"}',
        headers: { "X-Container-Name": "vm-fuzz", "X-API-Key": "sk-fuzz-right" },
      });
      expect(ok.status).toBe(200);
    } finally {
      await cloud.close();
    }
  });
});

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
