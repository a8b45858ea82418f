/**
 * The control lease with the registry's input queue: bad use refused in words, an agent's input
 * queued before a takeover is sent back rather than run in the middle of the person's input, and
 * `request_help`'s wait answered by the hand-back or given up with its signal.
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineCommand } from "./command.js";
import { ControlLease } from "./control.js";
import { CommandRegistry } from "./registry.js";

/** An input command that records its name and holds the queue until `release` is called. */
function recorder(log: string[]) {
  const gates = new Map<string, () => void>();
  const step = defineCommand({
    name: "step",
    description: "test input",
    input: true,
    params: z.object({ label: z.string(), hold: z.boolean().default(false) }),
    result: z.object({}),
    handler: async ({ label, hold }) => {
      log.push(`start ${label}`);
      if (hold) await new Promise<void>((resolve) => gates.set(label, resolve));
      log.push(`end ${label}`);
      return {};
    },
  });
  return { step, release: (label: string) => gates.get(label)?.() };
}

describe("ControlLease", () => {
  it("refuses a second take and a hand-back by a non-holder, naming the holder", () => {
    const control = new ControlLease();
    const lease = control.take("a person");
    expect(() => control.take("another person")).toThrow(/^Control is already held by a person since \d{4}-/);
    const stranger = { id: 999, who: "x", since: "" };
    expect(() => control.handBack(stranger)).toThrow(/^Only the holder of control can hand it back/);
    expect(control.handBack(lease, "done")).toMatchObject({ by: "a person", note: "done" });
    expect(() => control.handBack(lease)).toThrow("Control is not held: there is nothing to hand back");
  });

  it("sends back an agent's input queued before the takeover; it runs after the hand-back", async () => {
    const log: string[] = [];
    const { step, release } = recorder(log);
    const control = new ControlLease();
    const registry = new CommandRegistry([step], { control });
    // The agent's first command holds the queue; its second waits behind it.
    const first = registry.run("step", { label: "agent 1", hold: true });
    await expect.poll(() => log).toContain("start agent 1");
    const queued = registry.run("step", { label: "agent 2" });
    const failing = registry.run("step", { label: "agent 3" }, { whenPaused: "fail" });
    // The person takes control while both wait; the running one finishes.
    const lease = control.take("a person");
    release("agent 1");
    await first;
    // The person's input runs; the agent's queued commands do not.
    await registry.run("step", { label: "person" }, { holder: lease });
    expect(await failing).toMatchObject({
      success: false,
      code: "paused",
      error: expect.stringMatching(/^Paused: a person holds control since /),
    });
    expect(log).toEqual(["start agent 1", "end agent 1", "start person", "end person"]);
    control.handBack(lease);
    expect(await queued).toMatchObject({ success: true });
    expect(log.slice(-2)).toEqual(["start agent 2", "end agent 2"]);
  });

  it("answers request_help with the hand-back note, or gives up with its signal", async () => {
    const control = new ControlLease();
    const events: string[] = [];
    control.subscribe((event) => events.push(event.type));
    const asked = control.requestHelp("the captcha", new AbortController().signal);
    expect(control.state.help).toMatchObject([{ reason: "the captcha" }]);
    const lease = control.take("a person");
    control.handBack(lease, "solved");
    expect(await asked).toMatchObject({ note: "solved", by: "a person" });
    expect(control.state.help).toEqual([]);
    const timeout = new AbortController();
    const late = control.requestHelp("nobody", timeout.signal);
    timeout.abort(new Error("gave up"));
    await expect(late).rejects.toThrow("gave up");
    expect(control.state.help).toEqual([]);
    expect(events).toEqual([
      "help_requested",
      "control_taken",
      "control_returned",
      "help_ended",
      "help_requested",
      "help_ended",
    ]);
  });
});
