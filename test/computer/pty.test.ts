import { readFile } from "node:fs/promises";
import { get, type IncomingMessage } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import { isAlive, waitUntilGone } from "../support/processes.js";
import { startTestServer } from "../support/server.js";

let server: Awaited<ReturnType<typeof startTestServer>>;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

const b64 = (text: string) => Buffer.from(text).toString("base64");

async function api(method: string, path: string, body?: unknown) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, any> };
}

/** A bash without rc files, with a prompt the tests can recognise. */
async function startBash(extra: Record<string, unknown> = {}) {
  const r = await api("POST", "/pty", {
    command: "bash --norc --noprofile",
    envs: { PS1: "hangar-prompt$ " },
    ...extra,
  });
  expect(r.status).toBe(200);
  return r.json.pid as number;
}

/** Follows `GET /pty/{pid}/stream`, collecting the decoded output and the exit code. */
function follow(pid: number) {
  const client = new AbortController();
  let output = "";
  let exitCode: number | undefined;
  const done = (async () => {
    const res = await fetch(`${server.url}/pty/${pid}/stream`, { signal: client.signal });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const decoder = new TextDecoder();
    let buffer = "";
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const event = JSON.parse(buffer.slice(6, end));
        buffer = buffer.slice(end + 2);
        if (event.type === "output") output += Buffer.from(event.data, "base64").toString();
        else exitCode = event.code;
        end = buffer.indexOf("\n\n");
      }
    }
  })().catch((err) => {
    if (!client.signal.aborted) throw err;
  });
  const until = async (check: () => boolean, what: string) => {
    const deadline = Date.now() + 5000;
    while (!check()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; output so far: ${output}`);
      await sleep(10);
    }
  };
  return {
    get output() {
      return output;
    },
    waitFor: (pattern: RegExp) => until(() => pattern.test(output), String(pattern)),
    exit: async () => {
      await done;
      return exitCode;
    },
    close: () => client.abort(),
  };
}

/** How many bytes the process has written so far (its /proc io counter). */
const written = async (pid: number) =>
  Number(/wchar: (\d+)/.exec(await readFile(`/proc/${pid}/io`, "utf8"))![1]);

/** Waits until the process has written something (bash's first prompt). */
const promptWritten = (pid: number) =>
  vi.waitFor(async () => expect(await written(pid)).toBeGreaterThan(0), { timeout: 5000 });

describe("PTY sessions over HTTP", () => {
  it("keeps the first prompt for a subscriber that attaches late, then runs typed commands", async () => {
    const pid = await startBash();
    // The prompt is printed before anyone listens: wait until bash has written it.
    await promptWritten(pid);
    const stream = follow(pid);
    try {
      await stream.waitFor(/hangar-prompt\$ $/);
      expect((await api("POST", `/pty/${pid}/stdin`, { data: b64("echo sum=$((40+2))\r") })).json).toEqual({
        ok: true,
      });
      await stream.waitFor(/sum=42\r\n/);
    } finally {
      stream.close();
      await api("DELETE", `/pty/${pid}`);
    }
  });

  it("resizes the terminal as stty sees it and reports the size", async () => {
    const pid = await startBash({ cols: 120, rows: 30 });
    const stream = follow(pid);
    try {
      expect((await api("GET", `/pty/${pid}`)).json).toEqual({ pid, cols: 120, rows: 30 });
      expect((await api("POST", `/pty/${pid}/resize`, { cols: 100, rows: 40 })).json).toEqual({ ok: true });
      await api("POST", `/pty/${pid}/stdin`, { data: b64("stty size\r") });
      await stream.waitFor(/\D40 100\r\n/);
      expect((await api("GET", `/pty/${pid}`)).json).toEqual({ pid, cols: 100, rows: 40 });
    } finally {
      stream.close();
      await api("DELETE", `/pty/${pid}`);
    }
  });

  it("reports the exit code when the shell exits, and the stream ends", async () => {
    const pid = await startBash();
    const stream = follow(pid);
    await api("POST", `/pty/${pid}/stdin`, { data: b64("exit 7\r") });
    expect(await stream.exit()).toBe(7);
    // As in the reference, the session still answers after its process exited (clients reconnect).
    expect((await api("GET", `/pty/${pid}`)).json).toEqual({ pid, cols: 80, rows: 24 });
    const late = follow(pid);
    expect(await late.exit()).toBe(7);
    expect(late.output).toMatch(/hangar-prompt\$ exit 7/);
    await api("DELETE", `/pty/${pid}`);
  });

  it("kills a session on DELETE: the subscriber sees exit -1 and the process is gone", async () => {
    const pid = await startBash();
    const stream = follow(pid);
    await stream.waitFor(/hangar-prompt/);
    expect((await api("DELETE", `/pty/${pid}`)).json).toEqual({ killed: true });
    expect(await stream.exit()).toBe(-1);
    expect(await waitUntilGone(pid)).toBe(true);
    expect(await api("DELETE", `/pty/${pid}`)).toEqual({
      status: 404,
      json: { detail: `PTY session ${pid} not found` },
    });
  });

  it("answers 404 with a clear detail for an unknown pid on every route", async () => {
    const detail = { detail: "PTY session 999999999 not found" };
    expect(await api("GET", "/pty/999999999")).toEqual({ status: 404, json: detail });
    expect(await api("POST", "/pty/999999999/stdin", { data: b64("x") })).toEqual({
      status: 404,
      json: detail,
    });
    expect(await api("POST", "/pty/999999999/resize", { cols: 10, rows: 10 })).toEqual({
      status: 404,
      json: detail,
    });
    expect(await api("GET", "/pty/999999999/stream")).toEqual({ status: 404, json: detail });
    expect((await api("GET", "/pty/abc")).status).toBe(404);
  });

  it("rejects bad bodies with 400 naming the field", async () => {
    const bad = await api("POST", "/pty", { cols: "wide" });
    expect(bad.status).toBe(400);
    expect(bad.json.detail).toMatch(/^Invalid params: cols:/);
    expect((await api("POST", "/pty", { cwd: "/no/such/dir" })).json.detail).toBe(
      "Working directory does not exist: /no/such/dir",
    );
    const pid = await startBash();
    try {
      const r = await api("POST", `/pty/${pid}/stdin`, { data: "not base64!" });
      expect(r.status).toBe(400);
      expect(r.json.detail).toMatch(/data: must be base64/);
    } finally {
      await api("DELETE", `/pty/${pid}`);
    }
  });
});

describe("PTY over WebSocket", () => {
  it("replays the prompt, takes stdin and resize frames, and closes on exit", async () => {
    const pid = await startBash();
    await promptWritten(pid);
    const ws = new WebSocket(`${server.url.replace("http", "ws")}/pty/${pid}/ws`);
    let output = "";
    let exitCode: number | undefined;
    ws.on("message", (data) => {
      const frame = JSON.parse(String(data));
      if (frame.type === "output") output += Buffer.from(frame.data, "base64").toString();
      else exitCode = frame.code;
    });
    const closed = new Promise<number>((resolve) => ws.on("close", (code) => resolve(code)));
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    const waitFor = async (pattern: RegExp) => {
      const deadline = Date.now() + 5000;
      while (!pattern.test(output) && Date.now() < deadline) await sleep(10);
      expect(output).toMatch(pattern);
    };
    await waitFor(/hangar-prompt\$ $/);
    ws.send("not json"); // ignored, as in the reference
    ws.send(JSON.stringify({ type: "resize", cols: 90, rows: 33 }));
    ws.send(JSON.stringify({ type: "stdin", data: b64("stty size; exit 3\r") }));
    await waitFor(/\D33 90\r\n/);
    expect(await closed).toBe(1000);
    expect(exitCode).toBe(3);
  });

  it("refuses the upgrade for an unknown pid", async () => {
    const ws = new WebSocket(`${server.url.replace("http", "ws")}/pty/999999999/ws`);
    const status = await new Promise<number>((resolve) =>
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0)),
    );
    expect(status).toBe(404);
  });
});

describe("a client that does not keep up", () => {
  it("pauses the terminal instead of buffering a flood, and resumes when the client reads", async () => {
    const { json } = await api("POST", "/pty", { command: "exec yes hangar-flood" });
    const pid = json.pid as number;
    const response = await new Promise<IncomingMessage>((resolve) =>
      get(`${server.url}/pty/${pid}/stream`, resolve),
    );
    try {
      response.pause();
      // Once the socket's buffers are full the process blocks: what it wrote stops growing.
      let before = await written(pid);
      let stalled = false;
      for (const deadline = Date.now() + 5000; !stalled && Date.now() < deadline; ) {
        await sleep(300);
        const now = await written(pid);
        stalled = now === before;
        before = now;
      }
      expect(stalled).toBe(true);
      expect(before).toBeLessThan(32 * 1024 * 1024);

      response.resume();
      let resumed = false;
      for (const deadline = Date.now() + 5000; !resumed && Date.now() < deadline; ) {
        await sleep(50);
        resumed = (await written(pid)) - before > 1024 * 1024;
      }
      expect(resumed).toBe(true);
    } finally {
      response.destroy();
      await api("DELETE", `/pty/${pid}`);
    }
  });
});

describe("/openapi.json", () => {
  it("describes the PTY routes and /mcp beside /cmd", async () => {
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, any> };
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(["/cmd", "/pty", "/pty/{pid}", "/pty/{pid}/stdin", "/pty/{pid}/stream", "/mcp"]),
    );
    const start = doc.paths["/pty"].post.requestBody.content["application/json"].schema;
    expect(Object.keys(start.properties)).toEqual(["command", "cols", "rows", "cwd", "envs"]);
  });
});

describe("idle sessions", () => {
  it("are reaped after the idle timeout when nobody uses them", async () => {
    const quick = await startTestServer({ pty: { idleMs: 300, maxSessions: 1 } });
    const start = () =>
      fetch(`${quick.url}/pty`, { method: "POST", body: JSON.stringify({ command: "sleep 60" }) });
    try {
      const { pid } = (await (await start()).json()) as { pid: number };
      expect(isAlive(pid)).toBe(true);
      // Only one session may exist at a time here: the next one is refused while this one lives.
      const refused = await start();
      expect(refused.status).toBe(503);
      expect((await refused.json()).detail).toMatch(/Too many terminal sessions \(1\)/);

      expect(await waitUntilGone(pid)).toBe(true);
      expect((await fetch(`${quick.url}/pty/${pid}`)).status).toBe(404);
      const again = await start();
      expect(again.status).toBe(200);
      await fetch(`${quick.url}/pty/${(await again.json()).pid}`, { method: "DELETE" });
    } finally {
      await quick.close();
    }
  });
});
