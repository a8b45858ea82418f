/**
 * A person and an agent on one desktop (Xvfb + openbox), the person in the console in Debian's
 * Chromium, the agent a script posting /cmd: control as a lease (the agent's input is paused or
 * waits while the person types, and the typing arrives whole), `request_help` answered by the
 * person's hand-back note, and view-only share links (the server refuses their input; they stop
 * after revocation and expiry). Page screenshots go to .tmp/console/.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { collectProblems, launchBrowser } from "../support/browser.js";
import { type DesktopServer, eventually, startDesktopServer } from "../support/desktop.js";
import { rawRequest } from "../support/raw-http.js";
import { postCmd } from "../support/server.js";

const SHOTS = join(import.meta.dirname, "../../.tmp/console");

let desk: DesktopServer;
let browser: Browser;
let page: Page;
let trajectoryDir: string;
const problems: string[] = [];

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  trajectoryDir = mkdtempSync(join(tmpdir(), "hangar-control-trajectories-"));
  [desk, browser] = await Promise.all([
    startDesktopServer({ width: 1280, height: 800 }, { server: { trajectories: { dir: trajectoryDir } } }),
    launchBrowser(),
  ]);
  page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  collectProblems(page, problems);
  await page.goto(desk.server.url);
  await page.waitForFunction(() => (window as any).hangarLive.frames > 0);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await desk?.stop();
  rmSync(trajectoryDir, { recursive: true, force: true });
});

/** A `/live` viewer as a program: its JSON text frames, and a wait for one that matches. */
class Viewer {
  readonly frames: any[] = [];
  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data, binary) => {
      if (!binary) this.frames.push(JSON.parse(String(data)));
    });
  }
  static async open(path = "/live", headers: Record<string, string> = {}) {
    const ws = new WebSocket(`${desk.server.url.replace("http", "ws")}${path}`, { headers });
    const viewer = new Viewer(ws);
    await new Promise((resolve, reject) => {
      ws.once("open", resolve);
      ws.once("error", reject);
    });
    return viewer;
  }
  send(frame: unknown) {
    this.ws.send(JSON.stringify(frame));
  }
  /** The first frame after the `from`th that matches. */
  async next(match: (frame: any) => boolean, from = 0) {
    return eventually(() => this.frames.slice(from).find(match) ?? null, 10_000);
  }
  close() {
    this.ws.close();
  }
}

const control = async () => (await (await fetch(`${desk.server.url}/control`)).json()) as any;
const agent = (command: string, params: unknown, whenPaused?: "fail" | "queue") =>
  postCmd(
    desk.server.url,
    { command, params },
    whenPaused ? { headers: { "x-hangar-when-paused": whenPaused } } : {},
  );

describe("control as a lease (WS /live and /cmd)", () => {
  it("refuses a second take and a hand-back by a non-holder, naming who holds control", async () => {
    const [a, b] = await Promise.all([Viewer.open(), Viewer.open()]);
    try {
      a.send({ type: "control", on: true });
      await a.next((f) => f.type === "control" && f.on === true);
      const mark = b.frames.length;
      b.send({ type: "control", on: true });
      const refused = await b.next((f) => f.type === "error", mark);
      expect(refused).toEqual({
        type: "error",
        code: "conflict",
        error: expect.stringMatching(/^Control is already held by a person in the console since \d{4}-/),
      });
      b.send({ type: "control", on: false });
      const notHolder = await b.next((f) => f.type === "error" && f !== refused, mark);
      expect(notHolder.error).toMatch(/^Only the holder of control can hand it back/);
      // Every viewer is told the state; only the holder's says it is theirs.
      expect(await b.next((f) => f.type === "control_state" && f.held)).toMatchObject({
        held: true,
        by: "a person in the console",
        mine: false,
      });
      expect((await control()).held).toBe(true);
    } finally {
      a.close();
      b.close();
    }
    // Closing the holder's socket hands control back.
    await expect.poll(async () => (await control()).held).toBe(false);
  });

  it("pauses an agent's input: fail at once with `paused`, or wait and run after the hand-back", async () => {
    const person = await Viewer.open();
    try {
      person.send({ type: "control", on: true });
      await person.next((f) => f.type === "control" && f.on === true);
      const failed = await agent("move_cursor", { x: 10, y: 10 }, "fail");
      expect(failed.event).toMatchObject({
        success: false,
        code: "paused",
        held_by: "a person in the console",
        since: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
      expect(failed.event.error).toMatch(/^Paused: a person in the console holds control since /);
      // The person's own input runs.
      person.send({ type: "input", command: "move_cursor", params: { x: 300, y: 300 } });
      await expect.poll(() => desk.pointer()).toEqual({ x: 300, y: 300 });
      // A waiting agent command runs once control is handed back, not before.
      let done = false;
      const waiting = agent("move_cursor", { x: 400, y: 400 }).then((reply) => {
        done = true;
        return reply;
      });
      await expect.poll(async () => (await control()).held).toBe(true);
      expect(done).toBe(false);
      expect(await desk.pointer()).toEqual({ x: 300, y: 300 });
      person.send({ type: "control", on: false, note: "" });
      expect((await waiting).event).toMatchObject({ success: true, position: { x: 400, y: 400 } });
    } finally {
      person.close();
    }
  });

  it("writes the takeover and the hand-back into the trajectory, beside the commands", async () => {
    const started = await agent("start_trajectory", { name: "takeover" });
    const person = await Viewer.open();
    try {
      person.send({ type: "control", on: true });
      await person.next((f) => f.type === "control" && f.on === true);
      person.send({ type: "control", on: false, note: "done by hand" });
      await person.next((f) => f.type === "control" && f.on === false);
    } finally {
      person.close();
    }
    const stopped = await agent("stop_trajectory", {});
    expect(stopped.event.success).toBe(true);
    const steps = readFileSync(join(started.event.dir, "steps.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    const text = JSON.stringify(steps);
    expect(text).toContain("control_taken");
    expect(text).toContain("done by hand");
  });

  it("request_help is an MCP tool", async () => {
    const client = new Client({ name: "test", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", desk.server.url)));
    try {
      const { tools } = await client.listTools();
      const tool = tools.find((t) => t.name === "request_help");
      expect(tool?.inputSchema.properties).toHaveProperty("reason");
    } finally {
      await client.close();
    }
  });

  it("request_help without a person times out, and bad parameters are named", async () => {
    const late = await agent("request_help", { reason: "nobody is there", timeout: 1 });
    expect(late.event).toMatchObject({ success: false, code: "timeout" });
    expect(late.event.error).toBe("No one handed control back within 1 s");
    const empty = await agent("request_help", { reason: "  " });
    expect(empty.event).toMatchObject({ success: false, code: "invalid_params" });
    expect(empty.event.error).toMatch(/reason/);
    expect((await control()).help).toEqual([]);
  });
});

describe("the console page", () => {
  it("a person takes control while an agent keeps clicking: the typing arrives whole, the agent is paused", async () => {
    const file = join(desk.dir, "typed.txt");
    desk.spawn("xterm", [
      "-T",
      "typing-target",
      "-geometry",
      "40x6+700+100",
      "-e",
      "sh",
      "-c",
      `cat > ${file}`,
    ]);
    const xterm = await desk.geometry(await desk.waitForWindow("typing-target"));
    // The agent: a click far from the terminal (it would take the focus away) every few ms.
    let stop = false;
    const replies: Record<string, number> = {};
    const clicking = (async () => {
      while (!stop) {
        const reply = await agent("left_click", { x: 100, y: 700 }, "fail");
        const key = reply.event.success ? "ok" : reply.event.code;
        replies[key] = (replies[key] ?? 0) + 1;
        // An agent's pace (a model's turn takes far longer): the page shows every entry.
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    try {
      await page.check("#control");
      await page.locator("#control-banner").waitFor();
      const canvas = await page.locator("#screen").boundingBox();
      await page.mouse.click(
        canvas!.x + ((xterm.x + xterm.width / 2) / 1280) * canvas!.width,
        canvas!.y + ((xterm.y + xterm.height / 2) / 800) * canvas!.height,
      );
      const secret = "correct horse battery staple 12345";
      await page.keyboard.type(secret, { delay: 15 });
      await page.keyboard.press("Enter");
      await eventually(() => desk.read("typed.txt").includes("\n"), 10_000);
      expect(desk.read("typed.txt")).toBe(`${secret}\n`);
      expect(replies.paused).toBeGreaterThan(0);
      await page.screenshot({ path: join(SHOTS, "control-lease.png") });
      await page.fill("#handback-note", "typed the password");
      await page.click("#handback");
      await page.locator("#control-banner").waitFor({ state: "hidden" });
      const before = replies.ok ?? 0;
      await expect.poll(() => replies.ok ?? 0).toBeGreaterThan(before);
    } finally {
      stop = true;
      await clicking;
    }
    // The timeline shows the takeover and the hand-back.
    await page.locator('#timeline li[data-command="control_taken"]').last().waitFor();
    await page.locator('#timeline li[data-command="control_returned"]').last().waitFor();
    expect(
      await page.locator('#timeline li[data-command="control_returned"]').last().textContent(),
    ).toContain("typed the password");
  }, 60_000);

  it("shows request_help prominently; the hand-back note is the agent's answer", async () => {
    const asked = agent("request_help", { reason: "Please enter the 2FA code from your phone", timeout: 60 });
    const banner = page.locator("#help-banner");
    await banner.waitFor();
    expect(await banner.textContent()).toContain("Please enter the 2FA code from your phone");
    await page.screenshot({ path: join(SHOTS, "request-help.png") });
    await page.check("#control");
    await page.locator("#control-banner").waitFor();
    await page.fill("#handback-note", "code 424242 entered");
    await page.click("#handback");
    const reply = await asked;
    expect(reply.event).toMatchObject({
      success: true,
      note: "code 424242 entered",
      by: "a person in the console",
    });
    await banner.waitFor({ state: "hidden" });
    await page.locator('#timeline li[data-command="help_requested"]').last().waitFor();
    expect(problems).toEqual([]);
  });
});

describe("share links", () => {
  const share = async (body: unknown = {}, headers: Record<string, string> = {}) => {
    const res = await fetch(`${desk.server.url}/share`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  it("opens the live view and the timeline only, in a second browser context, and refuses input", async () => {
    const link = await share({ ttl_s: 600 });
    expect(link.status).toBe(201);
    expect(link.body.url).toMatch(/^\/shared\/[\w-]+\.\d+\.[\w-]+\/$/);
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    try {
      const viewer = await context.newPage();
      const errors: string[] = [];
      viewer.on("pageerror", (err) => errors.push(err.message));
      await viewer.goto(new URL(link.body.url, desk.server.url).href);
      await expect.poll(() => viewer.evaluate(() => (window as any).hangarLive.frames)).toBeGreaterThan(0);
      expect(await viewer.isVisible("#screen")).toBe(true);
      expect(await viewer.isVisible("#timeline")).toBe(true);
      for (const hidden of ["#control", "#command", "#share", "#refresh-recordings"]) {
        expect(await viewer.isVisible(hidden), hidden).toBe(false);
      }
      await agent("move_cursor", { x: 640, y: 400 });
      await viewer.locator('#timeline li[data-command="move_cursor"]').last().waitFor();
      await viewer.screenshot({ path: join(SHOTS, "share-link.png") });
      // The server refuses control and input on the link's socket, whatever a page sends.
      const token = link.body.token;
      const socket = await Viewer.open(`/shared/${token}/live`);
      socket.send({ type: "control", on: true });
      expect(await socket.next((f) => f.type === "error")).toMatchObject({ code: "view_only" });
      const mark = socket.frames.length;
      socket.send({ type: "input", command: "move_cursor", params: { x: 5, y: 5 } });
      expect(await socket.next((f) => f.type === "error", mark)).toMatchObject({ code: "view_only" });
      expect((await control()).held).toBe(false);
      expect(await desk.pointer()).toEqual({ x: 640, y: 400 });

      // Revoked: the open page's socket is closed, and the link opens nothing any more.
      const closed = new Promise<number>((resolve) => socket.ws.once("close", resolve));
      expect((await fetch(`${desk.server.url}/share/${link.body.id}`, { method: "DELETE" })).status).toBe(
        204,
      );
      expect(await closed).toBe(4403);
      const again = await fetch(new URL(link.body.url, desk.server.url));
      expect(again.status).toBe(403);
      expect(((await again.json()) as any).detail).toBe("This share link was revoked");
      expect((await fetch(`${desk.server.url}/share/${link.body.id}`, { method: "DELETE" })).status).toBe(
        404,
      );
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it("stops after its expiry; forged tokens, bad bodies and foreign origins are refused", async () => {
    const link = await share({ ttl_s: 1 });
    const url = new URL(`/shared/${link.body.token}/events`, desk.server.url);
    await expect.poll(async () => (await fetch(url)).status, { timeout: 5000 }).toBe(403);
    expect(((await (await fetch(url)).json()) as any).detail).toBe("This share link has expired");

    const good = await share({ ttl_s: 60 });
    const [id, expires, signature] = good.body.token.split(".");
    const forged = [
      `${id}.${Number(expires) + 3_600_000}.${signature}`,
      `${id}.${expires}.${signature.slice(0, -2)}AA`,
      `${id}.${expires}`,
      "nonsense",
    ];
    for (const token of forged) {
      const res = await fetch(new URL(`/shared/${token}/`, desk.server.url));
      expect(res.status, token).toBe(403);
    }
    expect((await fetch(new URL(`/shared/${good.body.token}/`, desk.server.url))).status).toBe(200);

    expect((await share({ ttl_s: 0 })).status).toBe(400);
    expect((await share({ ttl_s: 60, pad: "x".repeat(5000) })).status).toBe(413);
    expect((await share({ ttl_s: 60, admin: true })).body.detail).toMatch(/admin|unrecognized/i);
    const foreign = { origin: "https://evil.example" };
    expect((await rawRequest(desk.server.url, "POST", "/share", foreign, "{}")).status).toBe(403);
    expect((await rawRequest(desk.server.url, "GET", `/shared/${good.body.token}/`, foreign)).status).toBe(
      403,
    );
    const host = { host: "evil.example" };
    expect((await rawRequest(desk.server.url, "GET", `/shared/${good.body.token}/`, host)).status).toBe(403);
    expect((await rawRequest(desk.server.url, "DELETE", `/share/${good.body.id}`, host)).status).toBe(403);
    const foreignSocket = Viewer.open(`/shared/${good.body.token}/live`, { origin: "https://evil.example" });
    await expect(foreignSocket).rejects.toThrow(/403/);
  });
});
