import { once } from "node:events";
import { type IncomingMessage, request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isAlive, waitUntilGone } from "../support/processes.js";
import { startTestServer } from "../support/server.js";

let server: Awaited<ReturnType<typeof startTestServer>>;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

/** Reads `/cmd` events one by one as they arrive, with the time each one arrived. */
async function* readEvents(res: Response) {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const chunk = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (chunk.startsWith("data: ")) yield { at: Date.now(), event: JSON.parse(chunk.slice(6)) };
      end = buffer.indexOf("\n\n");
    }
  }
}

function post(body: unknown, signal?: AbortSignal) {
  return fetch(`${server.url}/cmd`, { method: "POST", body: JSON.stringify(body), signal });
}

describe("run_command with stream: true", () => {
  it("sends each line as it is printed, long before the command ends, then the return code", async () => {
    const res = await post({
      command: "run_command",
      params: { command: "echo a $(date +%s%3N); sleep 1; echo b >&2; exit 3", stream: true },
    });
    const events: { at: number; event: any }[] = [];
    for await (const e of readEvents(res)) events.push(e);

    expect(events.map((e) => e.event.content)).toEqual([
      { stream: "stdout", data: expect.stringMatching(/^a \d+\n$/) },
      { stream: "stderr", data: "b\n" },
      { stdout: "", stderr: "", return_code: 3 },
    ]);
    const printedAt = Number(events[0].event.content.data.split(" ")[1]);
    expect(events[0].at - printedAt).toBeLessThanOrEqual(100);
    expect(events[1].at - events[0].at).toBeGreaterThanOrEqual(900);
    expect(events[2].event).toMatchObject({ success: true, return_code: 3 });
  });

  it("without the flag answers with the single cua-shaped event", async () => {
    const r = await server.cmd("run_command", { command: "echo a; echo b" });
    expect(r.events).toHaveLength(1);
    expect(r.event).toMatchObject({ success: true, stdout: "a\nb\n", stderr: "", return_code: 0 });
  });

  it("kills the whole process group when the client goes away", async () => {
    const client = new AbortController();
    const res = await post(
      { command: "run_command", params: { command: "sleep 30 & echo $!; wait", stream: true } },
      client.signal,
    );
    const events = readEvents(res);
    const first = await events.next();
    const sleepPid = Number(first.value!.event.content.data.trim());
    expect(isAlive(sleepPid)).toBe(true);

    client.abort();
    await events.return(undefined).catch(() => undefined);
    expect(await waitUntilGone(sleepPid)).toBe(true);
  });

  it("cancels a command whose client stops reading a flood, instead of buffering without end", async () => {
    const body = JSON.stringify({
      command: "run_command",
      params: { command: "echo $$; exec yes hangar-flood", stream: true },
    });
    const response = await new Promise<IncomingMessage>((resolve) => {
      const req = request(`${server.url}/cmd`, { method: "POST" }, resolve);
      req.end(body);
    });
    try {
      // The first output is the shell's pid (possibly followed by the flood in the same event).
      let head = "";
      let found: RegExpExecArray | null = null;
      while (!found) {
        head += String((await once(response, "data"))[0]);
        found = /"data":"(\d+)\\n/.exec(head);
      }
      const pid = Number(found[1]);
      response.pause();
      expect(await waitUntilGone(pid, 20_000)).toBe(true);
      response.resume();
      let rest = "";
      response.on("data", (d) => {
        rest += String(d);
      });
      await once(response, "end");
      const last = JSON.parse(rest.trim().split("\n\n").at(-1)!.slice(6));
      expect(last).toMatchObject({ success: false, code: "cancelled" });
      expect(last.error).toMatch(/stopped reading/);
    } finally {
      response.destroy();
    }
  }, 30_000);
});
