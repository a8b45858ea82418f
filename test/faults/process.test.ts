/**
 * Fault suite, processes (issue rows 1, 4 and 10): a shell that cannot be started is a clear reply
 * and the server goes on; `run_command` answers when its shell exits; a timeout or a disconnect
 * kills the whole process group, background children included.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { postCommand } from "../support/clients.js";
import { descendants, isAlive, isRunning, waitUntilGone } from "../support/processes.js";
import { startTestServer } from "../support/server.js";
import { serveProcess } from "./support.js";

type Server = Awaited<ReturnType<typeof startTestServer>>;

/** Pids of processes whose command line contains `marker` (a unique sleep length). */
function pidsWith(marker: string): number[] {
  const out = execFileSync("ps", ["-eo", "pid=,args="], { encoding: "utf8" });
  return out
    .split("\n")
    .filter((line) => line.includes(`sleep ${marker}`) && !line.includes("sh -c"))
    .map((line) => Number(line.trim().split(/\s+/)[0]));
}

describe("run_command under faults", () => {
  let server: Server;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server?.close());

  it("survives a storm of commands while descriptors run out (EMFILE): clear replies, then serves again", async () => {
    const serve = await serveProcess([], { nofile: 60 });
    const agent = new Agent({ keepAlive: true, maxSockets: 30 });
    try {
      const post = () =>
        new Promise<string>((resolve) => {
          const req = request(
            `${serve.url}/cmd`,
            { method: "POST", agent, headers: { "content-type": "application/json" } },
            (res) => {
              let text = "";
              res.on("data", (d) => {
                text += d;
              });
              res.on("end", () => resolve(text));
            },
          );
          // The kernel may refuse a connection while descriptors are short: that is not a reply.
          req.on("error", () => resolve(""));
          req.end(JSON.stringify({ command: "run_command", params: { command: "sleep 0.5; echo hi" } }));
        });
      const replies = (await Promise.all(Array.from({ length: 30 }, post))).filter(Boolean);
      const events = replies.map((text) => JSON.parse(text.slice("data: ".length)));
      const refused = events.filter((e) => !e.success);
      expect(refused.length).toBeGreaterThan(0);
      for (const event of refused) {
        expect(event).toMatchObject({ code: "unavailable" });
        expect(event.error).toMatch(/out of resources \(EMFILE/);
      }
      expect(events.filter((e) => e.success).every((e) => e.stdout === "hi\n")).toBe(true);
      agent.destroy();
      expect(serve.child.exitCode).toBeNull();
      expect((await fetch(`${serve.url}/status`)).status).toBe(200);
      const after = await fetch(`${serve.url}/cmd`, {
        method: "POST",
        body: JSON.stringify({ command: "run_command", params: { command: "echo back" } }),
      }).then((r) => r.text());
      expect(after).toContain('"stdout":"back\\n"');
    } finally {
      agent.destroy();
      await serve.stop();
    }
  });

  it("answers a command line too long for the system (E2BIG) with invalid_params", async () => {
    const { event } = await server.cmd("run_command", { command: `echo ${"x".repeat(3 * 1024 * 1024)}` });
    expect(event).toMatchObject({ success: false, code: "invalid_params" });
    expect(event.error).toContain("E2BIG");
    expect((await server.cmd("run_command", { command: "echo fine" })).event.stdout).toBe("fine\n");
  });

  it("replies when the shell exits, not when a background child closes its pipes", async () => {
    const started = Date.now();
    const { event } = await server.cmd("run_command", { command: "sleep 30.11 & echo hi" });
    expect(event).toMatchObject({ success: true, stdout: "hi\n", return_code: 0 });
    expect(Date.now() - started).toBeLessThan(3000);
    // Without a timeout, what the command started in the background is its own business.
    const [sleeper] = pidsWith("30.11");
    expect(sleeper).toBeGreaterThan(0);
    process.kill(sleeper, "SIGKILL");
  });

  it("on timeout replies at the timeout and kills the whole group, background children included", async () => {
    const started = Date.now();
    const { event } = await server.cmd("run_command", { command: "sleep 30.12 & sleep 30.13", timeout: 1 });
    const elapsed = Date.now() - started;
    expect(event).toMatchObject({ success: false, code: "timeout" });
    expect(elapsed).toBeGreaterThanOrEqual(900);
    expect(elapsed).toBeLessThan(2000);
    await expect.poll(() => pidsWith("30.12").concat(pidsWith("30.13")), { timeout: 2000 }).toEqual([]);
  });

  it("with a timeout, a background child dies at the timeout even though the shell replied at once", async () => {
    const started = Date.now();
    const { event } = await server.cmd("run_command", { command: "sleep 30.14 & echo hi", timeout: 1 });
    expect(event).toMatchObject({ success: true, stdout: "hi\n" });
    expect(Date.now() - started).toBeLessThan(1000);
    const [sleeper] = pidsWith("30.14");
    expect(isAlive(sleeper)).toBe(true);
    expect(await waitUntilGone(sleeper, 3000)).toBe(true);
  });

  it.each(["SIGTERM", "SIGKILL"] as const)(
    "a server stopped by %s takes its launcher and waiting shells with it, and their FIFO directory",
    async (signal) => {
      const serve = await serveProcess();
      try {
        const shell = async () =>
          (await postCommand(serve.url, "run_command", { command: "tr '\\0' ' ' < /proc/$$/cmdline" })).event
            .stdout;
        // The first command starts the launcher; the next ones find shells waiting.
        // On a loaded machine the launcher and its first shells can take seconds to start.
        await vi.waitFor(async () => expect(await shell()).toBe("/bin/sh -s "), {
          interval: 100,
          timeout: 20_000,
        });
        const family = descendants(serve.pid);
        expect(family.filter((p) => p.args === "/bin/sh -s").length).toBeGreaterThan(0);
        const directories = readdirSync(tmpdir()).filter((name) =>
          name.startsWith(`hangar-shells-${serve.pid}-`),
        );
        expect(directories).toHaveLength(1);
        // SIGKILL: the server cannot clean up; its shells and launcher see their input end.
        process.kill(serve.pid, signal);
        await vi.waitFor(() => expect(family.filter((p) => isRunning(p.pid))).toEqual([]), { timeout: 5000 });
        await vi.waitFor(() => expect(existsSync(join(tmpdir(), directories[0]))).toBe(false), {
          timeout: 10_000,
        });
      } finally {
        await serve.stop();
      }
    },
    60_000,
  );

  it("a client that goes away kills the group, background children included", async () => {
    const controller = new AbortController();
    const pending = server
      .cmd("run_command", { command: "sleep 30.15 & sleep 30.16" }, { signal: controller.signal })
      .catch(() => undefined);
    await expect.poll(() => pidsWith("30.16").length, { timeout: 3000 }).toBe(1);
    controller.abort();
    await pending;
    await expect.poll(() => pidsWith("30.15").concat(pidsWith("30.16")), { timeout: 3000 }).toEqual([]);
  });
});
