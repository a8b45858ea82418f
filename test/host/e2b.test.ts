/**
 * E2B's control plane driven by E2B's own SDK (`e2b` 2.51 from npm, unmodified) against a host
 * service with `--e2b-port`, on real container desktops (podman.ts): create from a template and
 * from a warm pool, list by metadata, timeouts that renew and kill, kill, E2B's errors as the SDK's
 * classes; the per-port routes to services inside a sandbox (HTTP streamed, WebSocket, a browser
 * page) with their token and origin checks; and sandboxes found again after the service was
 * killed with SIGKILL.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync } from "node:fs";
import { rm } from "node:fs/promises";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuthenticationError, Sandbox, SandboxError, SandboxNotFoundError } from "e2b";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser } from "../support/browser.js";
import { rawRequest } from "../support/raw-http.js";
import { desktopCommand } from "./desktop-client.js";
import {
  E2B_KEY,
  openSocket,
  sdkOptions,
  startServiceIn,
  TEST_DESKTOP_TEMPLATE,
  viaLoopback,
} from "./e2b-support.js";
import { startPodman, TEST_IMAGE, type TestEngine, testUlimits } from "./podman.js";
import { killProcess, startTestHost, type TestHost } from "./support.js";

let engine: TestEngine;
let host: TestHost;
let e2bUrl: string;
const sandboxes: string[] = [];

const hostOptions = () => ({
  containerEngine: engine.address,
  desktopImage: TEST_IMAGE,
  containerUlimits: testUlimits(),
  defaultRuntime: "container" as const,
});

beforeAll(async () => {
  engine = await startPodman();
  host = await startTestHost({
    ...hostOptions(),
    e2b: { port: 0, env: { HANGAR_E2B_API_KEYS: E2B_KEY }, desktopTemplateImage: TEST_DESKTOP_TEMPLATE },
  });
  e2bUrl = host.service.e2b?.url ?? "";
}, 120_000);
afterAll(async () => {
  await host?.cleanup();
  await engine?.cleanup();
});

const opts = () => sdkOptions(e2bUrl);
const vmOf = async (sandboxId: string) => (await host.api("GET", `/svc/vms/e2b-${sandboxId}`)).body;
async function create(template = "base", extra: Parameters<typeof Sandbox.create>[1] = {}) {
  const sandbox = await Sandbox.create(template, { ...opts(), timeoutMs: 300_000, ...extra });
  sandboxes.push(sandbox.sandboxId);
  return sandbox;
}

describe("E2B's SDK against the control plane", () => {
  it("creates a sandbox from the base template, lists it by metadata, renews and shortens its timeout until it is killed", async () => {
    const run = `run-${Date.now()}`;
    const sandbox = await create("base", { metadata: { suite: "e2b", run } });
    expect(sandbox.sandboxId).toMatch(/^i[a-z0-9]{20}$/);
    // A Hangar desktop of the test image, running, under the sandbox's name.
    const vm = (await host.api("GET", `/svc/vms/e2b-${sandbox.sandboxId}`)).body;
    expect(vm).toMatchObject({ status: "running", runtime: "container", image: TEST_IMAGE, ready: true });
    expect(sandbox.getHost(8000)).toBe(`8000-${sandbox.sandboxId}.localhost:${new URL(e2bUrl).port}`);

    const info = await Sandbox.getInfo(sandbox.sandboxId, opts());
    expect(info).toMatchObject({
      sandboxId: sandbox.sandboxId,
      templateId: "base",
      metadata: { suite: "e2b", run },
      state: "running",
      cpuCount: 2,
      memoryMB: 2048,
    });
    expect(info.endAt.getTime() - info.startedAt.getTime()).toBe(300_000);

    // Its console: the computer server's JSON lines with their own time and level.
    const api = (path: string) => fetch(`${e2bUrl}${path}`, { headers: { "x-api-key": E2B_KEY } });
    const listeningLine = async () => {
      const logs = (await (await api(`/sandboxes/${sandbox.sandboxId}/logs`)).json()) as {
        logEntries: { timestamp: string; level: string; message: string }[];
      };
      return logs.logEntries.find((e) => /computer server listening/.test(e.message));
    };
    // The server's log is written in the background (pino, flushed every 250 ms): it comes.
    await expect.poll(listeningLine, { timeout: 10_000 }).toMatchObject({ level: "info" });
    const listening = await listeningLine();
    expect(Date.parse(listening?.timestamp ?? "")).toBeLessThanOrEqual(Date.now());
    const v2 = (await (await api(`/v2/sandboxes/${sandbox.sandboxId}/logs?search=listening`)).json()) as {
      logs: { message: string }[];
    };
    expect(v2.logs.length).toBeGreaterThan(0);
    expect(v2.logs.every((e) => e.message.includes("listening"))).toBe(true);

    const other = await create("base", { metadata: { suite: "e2b", run: `${run}-other` } });
    const listed = await Sandbox.list({ ...opts(), query: { metadata: { run } } }).nextItems();
    expect(listed.map((s) => s.sandboxId)).toEqual([sandbox.sandboxId]);
    const both = await Sandbox.list({ ...opts(), query: { metadata: { suite: "e2b" } } }).nextItems();
    expect(both.map((s) => s.sandboxId)).toEqual(
      expect.arrayContaining([sandbox.sandboxId, other.sandboxId]),
    );
    // Pages of one, newest first, and the state filter.
    const paginator = Sandbox.list({ ...opts(), limit: 1, query: { metadata: { suite: "e2b" } } });
    const first = await paginator.nextItems();
    expect(first.map((s) => s.sandboxId)).toEqual([other.sandboxId]);
    expect(paginator.hasNext).toBe(true);
    expect((await paginator.nextItems()).map((s) => s.sandboxId)).toEqual([sandbox.sandboxId]);
    const paused = await Sandbox.list({
      ...opts(),
      query: { metadata: { run }, state: ["paused"] },
    }).nextItems();
    expect(paused).toEqual([]);

    // setTimeout: longer, then a few seconds; the sandbox is killed when they run out.
    await sandbox.setTimeout(600_000);
    const renewed = await sandbox.getInfo();
    expect(renewed.endAt.getTime() - Date.now()).toBeGreaterThan(590_000);
    await sandbox.setTimeout(3_000);
    await expect
      .poll(async () => (await host.api("GET", `/svc/vms/e2b-${sandbox.sandboxId}`)).status, {
        timeout: 30_000,
      })
      .toBe(400);
    await expect(Sandbox.getInfo(sandbox.sandboxId, opts())).rejects.toThrow(SandboxNotFoundError);
    // The other sandbox was left alone.
    expect((await other.getInfo()).state).toBe("running");
  }, 240_000);

  it("kills a sandbox: its desktop is gone and every later call is E2B's 404", async () => {
    const sandbox = await create();
    expect(await sandbox.kill()).toBe(true);
    expect((await host.api("GET", `/svc/vms/e2b-${sandbox.sandboxId}`)).status).toBe(400);
    await expect(Sandbox.getInfo(sandbox.sandboxId, opts())).rejects.toThrow(SandboxNotFoundError);
    await expect(Sandbox.setTimeout(sandbox.sandboxId, 60_000, opts())).rejects.toThrow(SandboxNotFoundError);
    await expect(Sandbox.connect(sandbox.sandboxId, opts())).rejects.toThrow(SandboxNotFoundError);
    expect(await Sandbox.kill(sandbox.sandboxId, opts())).toBe(false);
    // Its ports answer like E2B's proxy for a sandbox it does not know.
    const port = await viaLoopback(sandbox.getHost(8000), "GET", "/status", {
      "e2b-traffic-access-token": "whatever",
    });
    expect(port.status).toBe(502);
    expect(JSON.parse(port.body)).toMatchObject({
      sandboxId: sandbox.sandboxId,
      message: "The sandbox was not found",
    });
  }, 180_000);

  it("a sandbox whose desktop is removed from outside is E2B's 404", async () => {
    const sandbox = await create();
    await engine.podman("rm", "--force", "--time", "0", `hangar-e2b-${sandbox.sandboxId}`);
    await expect(Sandbox.getInfo(sandbox.sandboxId, opts())).rejects.toThrow(SandboxNotFoundError);
    await expect
      .poll(async () => (await Sandbox.list({ ...opts() }).nextItems()).map((s) => s.sandboxId), {
        timeout: 10_000,
      })
      .not.toContain(sandbox.sandboxId);
  }, 180_000);

  it("refuses a wrong key with the SDK's AuthenticationError, and bad requests with E2B's 400 and 404", async () => {
    await expect(Sandbox.list(sdkOptions(e2bUrl, "not-the-key-0123456789")).nextItems()).rejects.toThrow(
      AuthenticationError,
    );
    await expect(Sandbox.create("base", sdkOptions(e2bUrl, "not-the-key-0123456789"))).rejects.toThrow(
      AuthenticationError,
    );
    const missing = await fetch(`${e2bUrl}/v2/sandboxes`);
    expect(missing.status).toBe(401);
    expect(await missing.json()).toMatchObject({ code: 401, message: expect.stringMatching(/X-API-Key/) });

    const unknown = await Sandbox.create("no-such-template", opts()).catch((err) => err);
    expect(unknown).toBeInstanceOf(SandboxError);
    expect(unknown.message).toMatch(/404: template 'no-such-template' not found/);
    const egress = await Sandbox.create("base", { ...opts(), network: { denyOut: ["10.0.0.0/8"] } }).catch(
      (err) => err,
    );
    expect(egress.message).toMatch(
      /400: network.denyOut of some addresses only is not supported .* deny all traffic/,
    );
    const memoryless = await fetch(`${e2bUrl}/v2/sandboxes`, {
      method: "POST",
      headers: { "x-api-key": E2B_KEY, "content-type": "application/json" },
      body: JSON.stringify({ templateID: "base", autoPauseMemory: false }),
    });
    expect(memoryless.status).toBe(400);
    expect((await memoryless.json()).message).toBe(
      "autoPauseMemory=false only applies when autoPause is true.",
    );
    const tooLong = await fetch(`${e2bUrl}/v2/sandboxes`, {
      method: "POST",
      headers: { "x-api-key": E2B_KEY, "content-type": "application/json" },
      body: JSON.stringify({ templateID: "base", timeout: 10 ** 9 }),
    });
    expect(tooLong.status).toBe(400);
    expect((await tooLong.json()).message).toMatch(/timeout: expected 1 to 604800 seconds/);
    // Nothing was made by the refused requests.
    const made = (await host.api("GET", "/svc/vms")).body.filter((vm: { name: string }) =>
      vm.name.startsWith("e2b-"),
    );
    expect(
      made.map((vm: { name: string }) => vm.name.slice(4)).every((id: string) => sandboxes.includes(id)),
    ).toBe(true);
  }, 60_000);

  it("a create whose client goes away leaves no desktop behind", async () => {
    const made = async () =>
      (await host.api("GET", "/svc/vms")).body
        .map((vm: { name: string }) => vm.name)
        .filter((name: string) => name.startsWith("e2b-") && !sandboxes.includes(name.slice(4)));
    const client = new AbortController();
    const pending = fetch(`${e2bUrl}/v2/sandboxes`, {
      method: "POST",
      headers: { "x-api-key": E2B_KEY, "content-type": "application/json" },
      body: JSON.stringify({ templateID: "base" }),
      signal: client.signal,
    }).catch((err: Error) => err);
    await expect.poll(made, { timeout: 30_000 }).toHaveLength(1);
    client.abort();
    expect(await pending).toBeInstanceOf(Error);
    await expect.poll(made, { timeout: 30_000 }).toHaveLength(0);
    // Nor a sandbox: every one listed is one this file made.
    const listed = (await Sandbox.list(opts()).nextItems()).map((s) => s.sandboxId);
    expect(listed.filter((id) => !sandboxes.includes(id))).toEqual([]);
  }, 60_000);

  it("pauses a container sandbox (its processes frozen) and resumes it on connect", async () => {
    const sandbox = await create();
    expect(await sandbox.pause()).toBe(true);
    // Paused already: E2B's 409, which the SDK reads as false.
    expect(await sandbox.pause()).toBe(false);
    expect((await sandbox.getInfo()).state).toBe("paused");
    expect((await vmOf(sandbox.sandboxId)).status).toBe("hibernated");
    const paused = await Sandbox.list({ ...opts(), query: { state: ["paused"] } }).nextItems();
    expect(paused.map((s) => s.sandboxId)).toContain(sandbox.sandboxId);
    // A per-port request to a paused sandbox without autoResume is refused, not hung.
    const asleep = await viaLoopback(sandbox.getHost(8000), "GET", "/status", {
      "e2b-traffic-access-token": sandbox.trafficAccessToken as string,
    });
    expect(asleep.status).toBe(502);
    expect(JSON.parse(asleep.body).message).toMatch(/is paused/);

    const again = await Sandbox.connect(sandbox.sandboxId, { ...opts(), timeoutMs: 120_000 });
    expect((await again.getInfo()).state).toBe("running");
    expect((await vmOf(sandbox.sandboxId)).status).toBe("running");
    const awake = await viaLoopback(sandbox.getHost(8000), "GET", "/status", {
      "e2b-traffic-access-token": sandbox.trafficAccessToken as string,
    });
    expect(awake.status).toBe(200);
    await again.kill();
  }, 180_000);

  it("pauses a sandbox at its timeout with autoPause, and wakes it on traffic with autoResume", async () => {
    const sandbox = await create("base", {
      timeoutMs: 3_000,
      lifecycle: { onTimeout: "pause", autoResume: true },
    });
    expect((await sandbox.getInfo()).lifecycle).toEqual({ onTimeout: "pause", autoResume: true });
    await expect
      .poll(async () => (await Sandbox.getInfo(sandbox.sandboxId, opts())).state, { timeout: 30_000 })
      .toBe("paused");
    expect((await vmOf(sandbox.sandboxId)).status).toBe("hibernated");
    // Traffic to one of its ports resumes it.
    const status = await viaLoopback(sandbox.getHost(8000), "GET", "/status", {
      "e2b-traffic-access-token": sandbox.trafficAccessToken as string,
    });
    expect(status.status).toBe(200);
    expect((await sandbox.getInfo()).state).toBe("running");
    await sandbox.kill();
  }, 180_000);
});

describe("a sandbox's ports", () => {
  let sandbox: Sandbox;
  let token: string;
  beforeAll(async () => {
    sandbox = await create();
    token = sandbox.trafficAccessToken as string;
    await startServiceIn(await vmOf(sandbox.sandboxId), 9000);
  }, 180_000);

  it("answer by Host with the sandbox's traffic token only; the token does not reach the service", async () => {
    expect(token).toMatch(/^[\w-]{20,}$/);
    const name = sandbox.getHost(9000);
    const without = await viaLoopback(name, "GET", "/headers");
    expect(without.status).toBe(403);
    expect(JSON.parse(without.body)).toMatchObject({
      sandboxId: sandbox.sandboxId,
      message: expect.stringMatching(/traffic access token.*missing/),
      code: 403,
    });
    const wrong = await viaLoopback(name, "GET", "/headers", { "e2b-traffic-access-token": "wrong" });
    expect(wrong.status).toBe(403);
    expect(JSON.parse(wrong.body).message).toMatch(/is invalid/);

    const ok = await viaLoopback(name, "GET", "/headers", { "e2b-traffic-access-token": token });
    expect(ok.status).toBe(200);
    const seen = JSON.parse(ok.body);
    expect(seen.host).toBe(name);
    expect(seen["e2b-traffic-access-token"]).toBeUndefined();
    // The computer server of the same desktop, on its own port.
    const status = await viaLoopback(sandbox.getHost(8000), "GET", "/status", {
      "e2b-traffic-access-token": token,
    });
    expect(status.status).toBe(200);
    expect(JSON.parse(status.body)).toMatchObject({ status: "ok" });
    // A port where nothing listens.
    const closed = await viaLoopback(sandbox.getHost(9999), "GET", "/", {
      "e2b-traffic-access-token": token,
    });
    expect(closed.status).toBe(502);
    expect(JSON.parse(closed.body).message).toMatch(/port 9999 is not open/);
  });

  it("answer by E2b-Sandbox-Id and E2b-Sandbox-Port on the API's address, and envd's control routes are refused", async () => {
    const headers = { "e2b-sandbox-id": sandbox.sandboxId, "e2b-sandbox-port": "9000" };
    expect((await rawRequest(e2bUrl, "GET", "/headers", headers)).status).toBe(403);
    const ok = await rawRequest(e2bUrl, "GET", "/headers", { ...headers, "e2b-traffic-access-token": token });
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)["e2b-sandbox-id"]).toBe(sandbox.sandboxId);
    const init = await rawRequest(
      e2bUrl,
      "POST",
      "/init",
      {
        "e2b-sandbox-id": sandbox.sandboxId,
        "e2b-sandbox-port": "49983",
        "content-type": "application/json",
      },
      JSON.stringify({ accessToken: "taken-over" }),
    );
    expect(init.status).toBe(403);
    expect(JSON.parse(init.body).message).toMatch(/envd's control route/);
  });

  it("stream a response as the service writes it", async () => {
    const name = sandbox.getHost(9000);
    const [port] = name.split(":").slice(-1);
    const firstLine = new Promise<{ first: string; rest: Promise<string> }>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port,
          path: "/stream",
          headers: { host: name, "e2b-traffic-access-token": token },
        },
        (res) => {
          res.setEncoding("utf8");
          let text = "";
          const rest = new Promise<string>((done) => res.on("end", () => done(text)));
          res.once("data", (chunk: string) => {
            text += chunk;
            res.on("data", (more: string) => {
              text += more;
            });
            resolve({ first: chunk, rest });
          });
        },
      );
      req.on("error", reject);
      req.end();
    });
    const { first, rest } = await firstLine;
    expect(first).toBe("first line\n");
    // The response is still open: it ends only once the service is told to end it.
    expect((await viaLoopback(name, "GET", "/release", { "e2b-traffic-access-token": token })).body).toBe(
      "released",
    );
    expect(await rest).toBe("first line\nlast line\n");
  });

  it("carry WebSockets with the token, refuse them without it or from another site's page", async () => {
    const url = `ws://${sandbox.getHost(9000)}/echo`;
    const refused = await openSocket(url);
    expect(refused).toMatchObject({ status: 403 });
    const foreign = await openSocket(url, {
      origin: "http://evil.example",
      "e2b-traffic-access-token": token,
    });
    expect(foreign).toMatchObject({ status: 403 });
    // A request just before, kept alive as a browser's is, leaves a connection to the port idle:
    // the upgrade takes a new one (the service takes upgrades only as a connection's first request).
    const keptAlive = new Agent({ keepAlive: true });
    const before = await fetchVia(keptAlive, sandbox.getHost(9000), "/headers", token);
    keptAlive.destroy();
    expect(before).toBe(200);
    const opened = await openSocket(url, { "e2b-traffic-access-token": token });
    if (!("ws" in opened)) throw new Error(`refused: ${JSON.stringify(opened)}`);
    opened.ws.send(Buffer.from([0, 1, 2, 255]), { binary: true });
    const [echo] = (await once(opened.ws, "message")) as [Buffer];
    expect([...echo]).toEqual([0, 1, 2, 255]);
    opened.ws.close();
    // A page of the same sandbox (another of its ports) may; a foreign page may not call the API either.
    const sameSandbox = await openSocket(url, {
      origin: `http://${sandbox.getHost(8000)}`,
      "e2b-traffic-access-token": token,
    });
    expect("ws" in sameSandbox).toBe(true);
    if ("ws" in sameSandbox) sameSandbox.ws.close();
    const api = await rawRequest(e2bUrl, "GET", "/v2/sandboxes", {
      "x-api-key": E2B_KEY,
      origin: "http://evil.example",
    });
    expect(api.status).toBe(403);
    const rebound = await rawRequest(e2bUrl, "GET", "/v2/sandboxes", {
      "x-api-key": E2B_KEY,
      host: "evil.example",
    });
    expect(rebound.status).toBe(403);
  });

  it("open in a browser with the token in the link once; the page's own WebSocket gets through", async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      const link = `http://${sandbox.getHost(9000)}/?e2b_traffic_access_token=${encodeURIComponent(token)}`;
      const response = await page.goto(link);
      // Sent back to the address without the token, which it now holds as a cookie of that host.
      expect(page.url()).toBe(`http://${sandbox.getHost(9000)}/`);
      expect(response?.status()).toBe(200);
      await page.waitForFunction(() => document.title !== "waiting", undefined, { timeout: 15_000 });
      expect(await page.title()).toBe("echoed through the sandbox");
      // Another browser without the link is refused.
      const other = await browser.newContext();
      const refused = await (await other.newPage()).goto(`http://${sandbox.getHost(9000)}/`);
      expect(refused?.status()).toBe(403);
      await other.close();
    } finally {
      await browser.close();
    }
  }, 60_000);

  it("are public when the sandbox was created so", async () => {
    const open = await create("base", { network: { allowPublicTraffic: true } });
    expect(open.trafficAccessToken).toBeUndefined();
    const status = await viaLoopback(open.getHost(8000), "GET", "/status");
    expect(status.status).toBe(200);
    await open.kill();
  }, 180_000);
});

describe("a warm pool as a template", () => {
  it("makes a create a claim; setTimeout renews the claim; kill releases it and the pool refills", async () => {
    const pool = await host.api("POST", "/svc/pools", {
      name: "e2b-warm",
      template: TEST_IMAGE,
      runtime: "container",
      size: 1,
      memory: "1GB",
    });
    expect(pool.status).toBe(201);
    await expect
      .poll(async () => (await host.api("GET", "/svc/pools/e2b-warm")).body.ready, { timeout: 120_000 })
      .toBe(1);
    const started = Date.now();
    const sandbox = await create("e2b-warm", { timeoutMs: 120_000, metadata: { from: "pool" } });
    const ms = Date.now() - started;
    const record = (await host.api("GET", "/svc/pools/e2b-warm")).body;
    const member = record.desktops.find((d: { state: string }) => d.state === "claimed");
    expect(member).toMatchObject({ claimedBy: `e2b sandbox ${sandbox.sandboxId}` });
    expect(Date.parse(member.expiresAt) - Date.now()).toBeGreaterThan(100_000);
    // A claim, not a boot: well under the seconds a cold desktop takes (envd's wait included).
    expect(ms).toBeLessThan(10_000);

    await sandbox.setTimeout(900_000);
    const renewed = (await host.api("GET", "/svc/pools/e2b-warm")).body.desktops.find(
      (d: { name: string }) => d.name === member.name,
    );
    expect(Date.parse(renewed.expiresAt) - Date.now()).toBeGreaterThan(890_000);
    expect((await sandbox.getInfo()).metadata).toEqual({ from: "pool" });

    await sandbox.kill();
    expect((await host.api("GET", `/svc/vms/${member.name}`)).status).toBe(400);
    await expect
      .poll(async () => (await host.api("GET", "/svc/pools/e2b-warm")).body.ready, { timeout: 120_000 })
      .toBe(1);
    expect((await host.api("DELETE", "/svc/pools/e2b-warm")).status).toBe(200);
  }, 300_000);
});

describe("the desktop template", () => {
  it("is the desktop template image, whose computer server waits for the display the SDK starts", async () => {
    const sandbox = await create("desktop");
    const vm = (await host.api("GET", `/svc/vms/e2b-${sandbox.sandboxId}`)).body;
    expect(vm).toMatchObject({ image: TEST_DESKTOP_TEMPLATE, ready: true });
    const shot = await desktopCommand(vm, "screenshot");
    expect(shot.result).toMatchObject({ success: false, error: expect.stringMatching(/X display :0/) });
    const tools = await desktopCommand(vm, "run_command", {
      command:
        "command -v startxfce4 scrot xdotool x11vnc xrandr xdpyinfo netstat pgrep && ls /opt/noVNC/utils/novnc_proxy /opt/noVNC/vnc.html",
    });
    expect(tools.result.content.return_code).toBe(0);
    await sandbox.kill();
  }, 180_000);
});

describe("a host service killed with SIGKILL", () => {
  let child: ChildProcess | undefined;
  let root: string;
  afterAll(async () => {
    await killProcess(child);
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("finds its sandboxes again after a restart: connect works, metadata and timeout are kept", async () => {
    root = mkdtempSync(join(tmpdir(), "hangar-e2b-kill-"));
    const start = async (port: number) => {
      const started = await spawnService(root, {
        ...hostOptions(),
        e2b: { port, env: { HANGAR_E2B_API_KEYS: E2B_KEY } },
      });
      child = started.child;
      return started.e2bUrl;
    };
    const url = await start(0);
    const sandbox = await Sandbox.create("base", {
      ...sdkOptions(url),
      timeoutMs: 600_000,
      metadata: { kept: "yes" },
    });
    const before = await sandbox.getInfo();
    await killProcess(child);
    // Started again on the same port: the SDK's address stays the same.
    expect(await start(Number(new URL(url).port))).toBe(url);
    const again = await Sandbox.connect(sandbox.sandboxId, { ...sdkOptions(url), timeoutMs: 60_000 });
    expect(again.sandboxId).toBe(sandbox.sandboxId);
    const after = await again.getInfo();
    expect(after.metadata).toEqual({ kept: "yes" });
    // connect only lengthens a lease.
    expect(after.endAt.getTime()).toBe(before.endAt.getTime());
    expect(again.trafficAccessToken).toBe(sandbox.trafficAccessToken);
    expect(
      (
        await viaLoopback(again.getHost(8000), "GET", "/status", {
          "e2b-traffic-access-token": again.trafficAccessToken as string,
        })
      ).status,
    ).toBe(200);
    await again.kill();
    await expect(Sandbox.getInfo(sandbox.sandboxId, sdkOptions(url))).rejects.toThrow(SandboxNotFoundError);
  }, 300_000);
});

/** The host service of fixtures/serve.ts in a process of its own, with these options; its E2B listener's URL. */
async function spawnService(root: string, options: object): Promise<{ child: ChildProcess; e2bUrl: string }> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(import.meta.dirname, "fixtures", "serve.ts"), root, JSON.stringify(options)],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let err = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    err = (err + c).slice(-2000);
  });
  const e2bUrl = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      const lines = out.split("\n");
      if (lines.length > 2) resolve(lines[1]);
    });
    child.once("exit", (code) => reject(new Error(`the service exited (${code}): ${err}`)));
  });
  return { child, e2bUrl };
}

/** A GET to a sandbox's port through `agent` (its name resolved to loopback); the status. */
function fetchVia(agent: Agent, hostWithPort: string, path: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: hostWithPort.split(":").at(-1),
        path,
        agent,
        headers: { host: hostWithPort, "e2b-traffic-access-token": token },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", reject);
    req.end();
  });
}
