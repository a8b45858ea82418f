/**
 * The console's Activity list shows each command once: opened after commands ran, after its event
 * stream was cut and opened again (as a proxy cutting an idle connection does), and after the
 * server behind it was replaced by a fresh one. Debian's Chromium, through a TCP relay the test
 * owns, so that it can cut the page's connections.
 */
import { mkdirSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser } from "../support/browser.js";
import { REFUSED_EVENT } from "../support/egress-events.js";
import { startTestServer } from "../support/server.js";

const SHOTS = join(import.meta.dirname, "../../.tmp/console");

type TestServer = Awaited<ReturnType<typeof startTestServer>>;

/** A TCP relay on loopback to the port `target()` names, which can cut every connection it carries. */
async function startRelay(target: () => number) {
  const sockets = new Set<Socket>();
  const relay = createServer((client) => {
    const upstream = connect(target(), "127.0.0.1");
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
      socket.on("error", () => undefined);
    }
    client.pipe(upstream).pipe(client);
    client.once("close", () => upstream.destroy());
    upstream.once("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
  const { port } = relay.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    cut() {
      for (const socket of sockets) socket.destroy();
    },
    close: () => new Promise<void>((resolve) => relay.close(() => resolve())),
  };
}

const portOf = (server: TestServer) => Number(new URL(server.url).port);

let server: TestServer;
let replacement: TestServer | undefined;
let relay: Awaited<ReturnType<typeof startRelay>>;
let browser: Browser;
let page: Page;
const problems: string[] = [];
/** How many times the page has asked for `/events`. */
let eventStreams = 0;

beforeAll(async () => {
  [server, browser] = await Promise.all([startTestServer(), launchBrowser()]);
  relay = await startRelay(() => portOf(replacement ?? server));
  mkdirSync(SHOTS, { recursive: true });
  page = await browser.newPage();
  page.on("pageerror", (err) => problems.push(err.message));
  page.on("request", (request) => {
    if (new URL(request.url()).pathname === "/events") eventStreams++;
  });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await relay?.close();
  await server?.close();
  await replacement?.close();
});

/** The rows of the Activity list: each entry's id and command. */
const rows = () =>
  page.$$eval("#timeline li", (items) =>
    items.map((item) => `${(item as HTMLElement).dataset.id} ${(item as HTMLElement).dataset.command}`),
  );

describe("the Activity list", () => {
  it("shows each command once when the page is opened after they ran", async () => {
    // One without parameters (its entry has none), one with, one that fails.
    await server.cmd("version");
    await server.cmd("run_command", { command: "echo hi" });
    await server.cmd("no_such_command_here");
    await server.cmd("get_screen_size");
    await page.goto(relay.url);
    await expect.poll(rows).toEqual(["1 version", "2 run_command", "3 get_screen_size"]);
    // A command run now arrives on the open stream, once.
    await server.cmd("version", {});
    await expect.poll(rows).toEqual(["1 version", "2 run_command", "3 get_screen_size", "4 version"]);
    expect(problems).toEqual([]);
  });

  it("shows each once after its event stream was cut and opened again", async () => {
    const before = eventStreams;
    relay.cut();
    await expect.poll(() => eventStreams, { timeout: 10_000 }).toBeGreaterThan(before);
    await server.cmd("version");
    await expect
      .poll(rows)
      .toEqual(["1 version", "2 run_command", "3 get_screen_size", "4 version", "5 version"]);
    expect(problems).toEqual([]);
  });

  it("shows the new server's commands alone after the server was replaced", async () => {
    replacement = await startTestServer();
    // Each run of a server numbers its entries in a series of its own, named on both routes.
    const series = async (url: string, path: string) => {
      const res = await fetch(`${url}${path}`);
      await res.body?.cancel();
      return res.headers.get("x-activity-series");
    };
    const first = await series(server.url, "/activity");
    expect(first).toMatch(/^[0-9a-f-]{36}$/);
    expect(await series(server.url, "/events")).toBe(first);
    expect(await series(replacement.url, "/activity")).not.toBe(first);
    await replacement.cmd("run_command", { command: "true" });
    await replacement.cmd("version");
    const before = eventStreams;
    relay.cut();
    await expect.poll(() => eventStreams, { timeout: 10_000 }).toBeGreaterThan(before);
    await expect.poll(rows).toEqual(["1 run_command", "2 version"]);
    await replacement.cmd("get_screen_size");
    await expect.poll(rows).toEqual(["1 run_command", "2 version", "3 get_screen_size"]);
    expect(problems).toEqual([]);
  });
});

describe("the host's egress decisions", () => {
  it("are rows of their own between the commands, saying what was refused and why", async () => {
    const target = replacement ?? server;
    await target.cmd("run_command", { command: "true" });
    const res = await fetch(`${target.url}/activity/egress`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        events: [REFUSED_EVENT],
      }),
    });
    expect(res.status).toBe(200);
    await target.cmd("version");
    const shown = () =>
      page.$$eval("#timeline li", (items) =>
        items.slice(-3).map((item) => ({
          text: item.querySelector(".cmd")?.textContent,
          note: item.classList.contains("note"),
          failed: item.classList.contains("failed"),
        })),
      );
    await expect.poll(shown).toEqual([
      { text: 'run_command {"command":"true"}', note: false, failed: false },
      { text: "refused evil.example.net:443 (not in the allow list)", note: true, failed: true },
      { text: "version ", note: false, failed: false },
    ]);
    await page.locator("#timeline li.note").last().click();
    await expect.poll(() => page.textContent("#detail")).toContain("egress: refused evil.example.net:443");
    await page.screenshot({ path: join(SHOTS, "timeline-egress.png"), fullPage: true });
    expect(problems).toEqual([]);
  });
});
