import { Writable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { allCommands } from "../../../commands/index.js";
import { defineCommand } from "./command.js";
import { CommandRegistry } from "./registry.js";

function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { log: pino({ level: "info" }, stream), lines };
}

const slow = defineCommand({
  name: "slow_input",
  description: "test: records when it starts and ends",
  params: z.object({ id: z.number(), ms: z.number() }),
  result: z.object({}),
  input: true,
  handler: async ({ id, ms }) => {
    order.push(`start ${id}`);
    await sleep(ms);
    order.push(`end ${id}`);
    return {};
  },
});
const order: string[] = [];

describe("CommandRegistry", () => {
  it("logs one line per command with name, duration and success, never the parameters", async () => {
    const { log, lines } = capturingLogger();
    const registry = new CommandRegistry(allCommands, { log });
    await registry.run("write_text", { path: "/nonexistent-dir/secret.txt", content: "TOP-SECRET-CONTENT" });
    await registry.run("version", {});
    // The logger writes asynchronously: wait for both lines.
    const commandLines = await vi.waitFor(
      () => {
        const found = lines.filter((l) => l.msg === "command");
        expect(found).toHaveLength(2);
        return found;
      },
      { timeout: 10_000 },
    );
    expect(commandLines[0]).toMatchObject({ command: "write_text", success: false, ms: expect.any(Number) });
    expect(commandLines[1]).toMatchObject({ command: "version", success: true });
    expect(JSON.stringify(lines)).not.toContain("TOP-SECRET-CONTENT");
    expect(JSON.stringify(lines)).not.toContain("secret.txt");
  });

  it("runs input commands one at a time in arrival order; others run alongside", async () => {
    const registry = new CommandRegistry([slow, ...allCommands]);
    order.length = 0;
    const started = Date.now();
    await Promise.all([
      registry.run("slow_input", { id: 1, ms: 60 }),
      registry.run("slow_input", { id: 2, ms: 10 }),
      registry.run("version", {}).then(() => order.push("version")),
    ]);
    // The inputs in arrival order, one after the other; `version` does not wait for them (it answers
    // at once, before the first input has even started: it is not queued).
    expect(order.filter((step) => step !== "version")).toEqual(["start 1", "end 1", "start 2", "end 2"]);
    expect(order.indexOf("version")).toBeLessThan(order.indexOf("end 1"));
    expect(Date.now() - started).toBeGreaterThanOrEqual(65);
  });

  it("fails a command that outlives its deadline with code timeout", async () => {
    const registry = new CommandRegistry([slow], { defaultDeadlineMs: 50 });
    const outcome = await registry.run("slow_input", { id: 3, ms: 500 });
    expect(outcome).toMatchObject({ success: false, code: "timeout" });
  });

  it("turns an unexpected exception into an internal failure naming the command", async () => {
    const broken = defineCommand({
      name: "broken",
      description: "test: throws",
      params: z.object({}),
      result: z.object({}),
      handler: () => {
        throw new TypeError("boom");
      },
    });
    const outcome = await new CommandRegistry([broken]).run("broken", {});
    expect(outcome).toEqual({ success: false, code: "internal", error: "broken failed: boom", fields: {} });
  });

  it("refuses two definitions of one name or alias", () => {
    expect(() => new CommandRegistry([slow, slow])).toThrow(/defined twice/);
  });

  it("fails desktop commands with unavailable when it has no desktop", async () => {
    const needsDesktop = defineCommand({
      name: "needs_desktop",
      description: "test",
      params: z.object({}),
      result: z.object({}),
      handler: async (_p, ctx) => {
        await ctx.desktop();
        return {};
      },
    });
    const outcome = await new CommandRegistry([needsDesktop]).run("needs_desktop", {});
    expect(outcome).toMatchObject({ success: false, code: "unavailable" });
  });

  it("suggests like the reference: prefix of two characters or containing the input, at most five", () => {
    const registry = new CommandRegistry(allCommands);
    expect(registry.suggest("dir")).toEqual(expect.arrayContaining(["directory_exists", "list_dir"]));
    expect(registry.suggest("get").length).toBeLessThanOrEqual(5);
    expect(registry.unknownCommandMessage("zzz")).toBe("Unknown command: zzz");
  });

  it("fails a command whose result is not what its result schema promises, when results are checked", async () => {
    const liar = defineCommand({
      name: "liar",
      description: "promises a number, returns a string",
      params: z.object({}),
      result: z.object({ count: z.number() }),
      handler: () => ({ count: "three" }) as unknown as { count: number },
    });
    const checked = new CommandRegistry([liar], { checkResults: true });
    const outcome = await checked.run("liar", {});
    expect(outcome).toMatchObject({ success: false, code: "internal" });
    expect(outcome.success ? "" : outcome.error).toMatch(
      /liar failed: its result does not match its result schema: .*count/,
    );
    const trusting = new CommandRegistry([liar], { checkResults: false });
    expect((await trusting.run("liar", {})).success).toBe(true);
  });
});
