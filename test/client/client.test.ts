/**
 * The typed client against a real computer server over real HTTP and WebSocket: typed methods,
 * typed errors, deadlines and AbortSignal, cloud credentials; and that it loads none of the server.
 */
import { readFileSync } from "node:fs";
import { type AddressInfo, createServer, type Socket } from "node:net";
import { dirname, join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import {
  type CommandName,
  type CommandParams,
  type CommandResult,
  Hangar,
  HangarError,
} from "../../src/client/index.js";
import { postCmd, startTestServer } from "../support/server.js";

type Server = Awaited<ReturnType<typeof startTestServer>>;

async function failureOf(call: Promise<unknown>): Promise<HangarError> {
  const err = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(HangarError);
  return err as HangarError;
}

describe("hangar/client", () => {
  let server: Server;
  let cloud: Server;
  const KEY = "k".repeat(32);

  beforeAll(async () => {
    server = await startTestServer();
    cloud = await startTestServer({ cloud: { containerName: "box-1", keys: [KEY], limiter: false } });
  });
  afterAll(async () => {
    await server?.close();
    await cloud?.close();
  });

  it("has one method per command, typed from the command's zod definitions", () => {
    expectTypeOf<CommandParams<"left_click">>().toHaveProperty("x");
    expectTypeOf<CommandResult<"get_screen_size">>().toEqualTypeOf<{
      size: { width: number; height: number };
    }>();
    expectTypeOf<CommandResult<"wait">>().toEqualTypeOf<{ waited_ms: number }>();
    const hangar = new Hangar({ url: server.url });
    expectTypeOf(hangar.typeText)
      .parameter(0)
      .toEqualTypeOf<{ text: string; verify?: boolean; verify_ms?: number }>();
    expectTypeOf(hangar.computerAction).returns.resolves.toHaveProperty("tool_result");
    expectTypeOf<"left_click">().toExtend<CommandName>();
    expectTypeOf<"no_such_command">().not.toExtend<CommandName>();
  });

  for (const transport of ["cmd", "ws"] as const) {
    describe(`over ${transport === "cmd" ? "POST /cmd (SSE)" : "/ws"}`, () => {
      let hangar: Hangar;
      beforeAll(() => {
        hangar = new Hangar({ url: server.url, transport });
      });
      afterAll(() => hangar.close());

      it("returns results and throws HangarError with the server's code", async () => {
        expect(await hangar.wait({ ms: 1 })).toEqual({ waited_ms: 1 });
        const version = await hangar.version();
        expect(version.protocol).toBeTypeOf("number");
        const invalid = await failureOf(hangar.wait({ ms: -1 }));
        expect(invalid.code).toBe("invalid_params");
        expect(invalid.message).toMatch(/ms/);
        const unavailable = await failureOf(hangar.getScreenSize());
        expect(unavailable.code).toBe("unavailable");
        // Calls in flight together get their own replies.
        const waits = await Promise.all([30, 1, 10].map((ms) => hangar.wait({ ms })));
        expect(waits.map((w) => w.waited_ms)).toEqual([30, 1, 10]);
      });

      it("gives up at the per-call deadline and on an AbortSignal, and the next call still works", async () => {
        const started = performance.now();
        const late = await failureOf(hangar.wait({ duration: 1 }, { timeoutMs: 100 }));
        expect(late.code).toBe("timeout");
        expect(performance.now() - started).toBeLessThan(2000);
        const controller = new AbortController();
        const pending = hangar.wait({ duration: 1 }, { signal: controller.signal });
        controller.abort();
        expect((await failureOf(pending)).code).toBe("cancelled");
        // On /ws the abandoned calls' replies come later, in order; this call gets its own.
        expect(await hangar.wait({ ms: 2 }, { timeoutMs: 15_000 })).toEqual({ waited_ms: 2 });
      }, 20_000);
    });
  }

  it("sends cloud credentials as headers on /cmd and as the handshake on /ws", async () => {
    for (const transport of ["cmd", "ws"] as const) {
      const good = new Hangar({ url: cloud.url, transport, apiKey: KEY, containerName: "box-1" });
      expect(await good.wait({ ms: 1 })).toEqual({ waited_ms: 1 });
      await good.close();
      const bad = new Hangar({ url: cloud.url, transport, apiKey: "x".repeat(32), containerName: "box-1" });
      const err = await failureOf(bad.wait({ ms: 1 }));
      expect(err.code).toBe(transport === "cmd" ? "http" : "network");
      if (transport === "cmd") expect(err.fields.status).toBe(401);
      await bad.close();
    }
  });

  it("computer_action is refused to a page of another origin, and needs credentials in cloud mode", async () => {
    const body = { command: "computer_action", params: { action: { action: "screenshot" } } };
    const foreign = await postCmd(server.url, body, { headers: { origin: "http://evil.example" } });
    expect(foreign.status).toBe(403);
    expect(foreign.events).toEqual([]);
    const anonymous = await postCmd(cloud.url, body);
    expect(anonymous.status).toBe(401);
  });

  it("applies the deadline to opening the WebSocket too", async () => {
    // A server that accepts connections and never answers the upgrade.
    const sockets: Socket[] = [];
    const silent = createServer((socket) => {
      socket.on("error", () => undefined);
      sockets.push(socket);
    });
    await new Promise<void>((done) => silent.listen(0, "127.0.0.1", done));
    try {
      const port = (silent.address() as AddressInfo).port;
      const hangar = new Hangar({ url: `http://127.0.0.1:${port}`, transport: "ws" });
      expect((await failureOf(hangar.version(undefined, { timeoutMs: 200 }))).code).toBe("timeout");
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });

  it("reports a server that is not there as a network error, and can be awaited like any value", async () => {
    const nowhere = new Hangar({ url: "http://127.0.0.1:9", timeoutMs: 5000 });
    expect((await failureOf(nowhere.version())).code).toBe("network");
    // `await` looks for `then`: it is not taken for a command.
    const resolved = await Promise.resolve(nowhere);
    expect(resolved).toBe(nowhere);
  });

  it("imports none of the server's modules at run time (type-only imports), and no agent SDK", () => {
    const client = join(import.meta.dirname, "../../src/client");
    const main = runtimeImports(join(client, "index.ts"));
    for (const file of main.files) expect(file.startsWith(client), file).toBe(true);
    expect(main.files.size).toBeGreaterThanOrEqual(3);
    expect([...main.packages]).toEqual(["ws"]);
    // The SDK adapters are subpaths of their own: each loads its SDK (or only its types), nothing of the server.
    const anthropic = runtimeImports(join(client, "anthropic.ts"));
    for (const file of anthropic.files) expect(file.startsWith(client), file).toBe(true);
    expect([...anthropic.packages].sort()).toEqual([
      "@anthropic-ai/sdk/helpers/beta/toolsets",
      "node:timers/promises",
      "ws",
    ]);
    const agents = runtimeImports(join(client, "openai-agents.ts"));
    for (const file of agents.files) expect(file.startsWith(client), file).toBe(true);
    expect([...agents.packages]).toEqual(["ws"]);
  });
});

/** The modules a client entry loads at run time (following relative imports) and the packages they load. */
function runtimeImports(entry: string): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string) => {
    if (files.has(file)) return;
    files.add(file);
    const source = readFileSync(file, "utf8");
    const specs = [
      ...[...source.matchAll(/^(?:import|export)\s+(?!type\b)[^;]*?from\s+"([^"]+)"/gm)].map((m) => m[1]),
      ...[...source.matchAll(/import\("([^"]+)"\)/g)].map((m) => m[1]),
    ];
    for (const spec of specs) {
      if (spec.startsWith(".")) visit(resolve(dirname(file), spec.replace(/\.js$/, ".ts")));
      else packages.add(spec);
    }
  };
  visit(entry);
  return { files, packages };
}
