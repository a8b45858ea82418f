/**
 * Fault suite, secrets (issue row 7): with `HANGAR_API_KEYS`, the server process's environment does
 * not hold the keys, so no command can read them from /proc; the keys still work.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postCommand } from "../support/clients.js";
import { type ServeProcess, serveProcess } from "./support.js";

const NAME = "vm-secrets";
const KEY = "sk-never-readable-by-commands";
const auth = { "X-Container-Name": NAME, "X-API-Key": KEY };

describe("API keys in cloud mode", () => {
  let serve: ServeProcess;
  beforeAll(async () => {
    serve = await serveProcess([], { env: { HANGAR_API_KEYS: `${KEY},sk-other`, CONTAINER_NAME: NAME } });
  });
  afterAll(() => serve?.stop());

  it("cannot be read by a command from the server's /proc/<pid>/environ", async () => {
    const reply = await postCommand(
      serve.url,
      "run_command",
      { command: "echo $PPID; tr '\\0' '\\n' < /proc/$PPID/environ" },
      auth,
    );
    expect(reply.event.success).toBe(true);
    const [ppid, ...environ] = reply.event.stdout.split("\n");
    expect(Number(ppid)).toBe(serve.pid);
    expect(environ.length).toBeGreaterThan(3);
    expect(reply.event.stdout).not.toContain(KEY);
    expect(reply.event.stdout).not.toContain("HANGAR_API_KEYS=");
    expect(readFileSync(`/proc/${serve.pid}/environ`, "utf8")).not.toContain(KEY);
    // Nor from its own environment.
    const env = await postCommand(serve.url, "run_command", { command: "env" }, auth);
    expect(env.event.stdout).not.toContain(KEY);
  });

  it("still checks keys with them, and the server stops with its launcher", async () => {
    expect((await postCommand(serve.url, "version", {}, { ...auth, "X-API-Key": "sk-wrong" })).status).toBe(
      401,
    );
    expect(
      (await postCommand(serve.url, "version", {}, { ...auth, "X-API-Key": "sk-other" })).event,
    ).toMatchObject({
      success: true,
    });
    const pid = serve.pid;
    await serve.stop();
    expect(serve.child.exitCode).toBe(0);
    await expect
      .poll(() => {
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      })
      .toBe(false);
  });
});
