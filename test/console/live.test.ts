/**
 * `WS /live` as a program sees it: bad frames get a clear answer and the socket stays open; input
 * runs only after taking control; a server without a display says so in words.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestSocket } from "../support/clients.js";
import { startTestServer } from "../support/server.js";

type Server = Awaited<ReturnType<typeof startTestServer>>;
let server: Server;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

const liveUrl = () => `${server.url.replace("http", "ws")}/live`;

/**
 * The next frame that answers the viewer (the "No picture" notice is repeated once a second; the
 * control state is sent to every viewer at the start and at each change).
 */
async function reply(socket: TestSocket) {
  for (;;) {
    const frame = await socket.next();
    if (!/^No picture: /.test(frame?.error ?? "") && frame?.type !== "control_state") return frame;
  }
}

describe("WS /live", () => {
  it("answers bad frames in words and keeps the socket open", async () => {
    const socket = await TestSocket.open(liveUrl());
    // The control state first, then, with no display here, why there is no picture.
    expect(await socket.next()).toEqual({ type: "control_state", held: false, help: [], mine: false });
    expect(await socket.next()).toEqual({ type: "error", error: expect.stringMatching(/^No picture: /) });
    socket.sendRaw("{not json");
    expect(await reply(socket)).toEqual({ type: "error", error: "Invalid JSON" });
    socket.sendRaw(JSON.stringify({ type: "settings", quality: 500 }));
    expect((await reply(socket)).error).toMatch(/500|quality|<=95/i);
    socket.sendRaw(JSON.stringify({ type: "input", command: "type_text", params: { text: "x" } }));
    expect(await reply(socket)).toEqual({ type: "error", error: "Take control first" });
    socket.sendRaw(JSON.stringify({ type: "input", command: "run_command", params: { command: "id" } }));
    expect((await reply(socket)).type).toBe("error");
    socket.sendRaw(JSON.stringify({ type: "control", on: true }));
    expect(await reply(socket)).toEqual({ type: "control", on: true });
    await socket.close();
  });

  it("runs a controlling viewer's input through the registry, shown in the timeline as live", async () => {
    // The last test's viewer handed control back when its socket closed.
    await expect.poll(async () => (await (await fetch(`${server.url}/control`)).json()).held).toBe(false);
    const socket = await TestSocket.open(liveUrl());
    socket.sendRaw(JSON.stringify({ type: "control", on: true }));
    expect(await reply(socket)).toEqual({ type: "control", on: true });
    socket.sendRaw(JSON.stringify({ type: "input", command: "press_key", params: { key: "a" } }));
    // Without a display the command fails, and the failure comes back in words.
    expect(await reply(socket)).toEqual({ type: "error", error: expect.any(String) });
    const { entries } = (await (await fetch(`${server.url}/activity`)).json()) as { entries: any[] };
    expect(entries.at(-1)).toMatchObject({ transport: "live", command: "press_key", params: { key: "a" } });
    await socket.close();
  });
});

describe("GET /console/status", () => {
  it("says in words that there is no display", async () => {
    const status = (await (await fetch(`${server.url}/console/status`)).json()) as Record<string, unknown>;
    expect(status).toMatchObject({
      backend: null,
      display: null,
      version: expect.stringMatching(/^\d+\.\d+\.\d+/),
    });
    expect(status.display_error).toMatch(/^No display: /);
    expect(status.display_error).not.toMatch(/No display: No display/);
  });
});
