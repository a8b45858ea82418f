/**
 * E2B's SDKs, unmodified, driving Hangar container desktops end to end through the host service:
 * every envd call goes through its router (`E2B_SANDBOX_URL`) and the desktop's tunnel to the
 * envd its computer server runs. `e2b`: commands with their callbacks, a background command fed
 * on stdin and killed, a PTY, files (50 MB each way), a watched directory, the environment and
 * the access token. `@e2b/desktop`: the `desktop` template driven as its SDK drives it — Xvfb and
 * Xfce started through envd, screenshots, the mouse and the keyboard, `open`, the noVNC stream
 * through its per-port URL — with every effect read back from the same desktop by Hangar's own
 * computer server (`/cmd`).
 */
import { createHash, randomBytes } from "node:crypto";
import { Sandbox as DesktopSandbox } from "@e2b/desktop";
import { AuthenticationError, CommandExitError, Sandbox } from "e2b";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawRequest } from "../support/raw-http.js";
import { desktopCommand, pngSize } from "./desktop-client.js";
import { E2B_KEY, openSocket, sdkOptions, TEST_DESKTOP_TEMPLATE, viaLoopback } from "./e2b-support.js";
import { startPodman, TEST_IMAGE, type TestEngine, testUlimits } from "./podman.js";
import { startTestHost, type TestHost } from "./support.js";

let engine: TestEngine;
let host: TestHost;
let e2bUrl: string;

beforeAll(async () => {
  engine = await startPodman();
  host = await startTestHost({
    containerEngine: engine.address,
    desktopImage: TEST_IMAGE,
    containerUlimits: testUlimits(),
    defaultRuntime: "container",
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

describe("e2b's Sandbox through the host service", () => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    sandbox = await Sandbox.create("base", {
      ...opts(),
      timeoutMs: 600_000,
      envs: { GREETING: "hello from e2b" },
    });
  }, 180_000);
  afterAll(async () => {
    await sandbox?.kill();
  });

  it("runs commands with their output streamed to callbacks and the sandbox's environment", async () => {
    expect(await sandbox.isRunning()).toBe(true);
    const out: string[] = [];
    const err: string[] = [];
    const result = await sandbox.commands.run('echo "$GREETING"; echo oops >&2; echo done', {
      onStdout: (data) => {
        out.push(data);
      },
      onStderr: (data) => {
        err.push(data);
      },
    });
    expect(result).toMatchObject({ exitCode: 0, stdout: "hello from e2b\ndone\n", stderr: "oops\n" });
    expect(out.join("")).toBe("hello from e2b\ndone\n");
    expect(err.join("")).toBe("oops\n");
    const failed = await sandbox.commands.run("exit 3").catch((e) => e);
    expect(failed).toBeInstanceOf(CommandExitError);
    expect(failed.exitCode).toBe(3);
  });

  it("feeds a background command on stdin and kills it", async () => {
    const lines: string[] = [];
    const handle = await sandbox.commands.run("cat", {
      background: true,
      stdin: true,
      onStdout: (data) => {
        lines.push(data);
      },
    });
    await sandbox.commands.sendStdin(handle.pid, "first line\n");
    await expect.poll(() => lines.join(""), { timeout: 10_000 }).toBe("first line\n");
    expect((await sandbox.commands.list()).map((p) => p.pid)).toContain(handle.pid);
    expect(await sandbox.commands.kill(handle.pid)).toBe(true);
    const ended = await handle.wait().catch((e) => e);
    expect(ended).toBeInstanceOf(CommandExitError);
  });

  it("opens a PTY, resizes it and types into it", async () => {
    let screen = "";
    const decoder = new TextDecoder();
    const pty = await sandbox.pty.create({
      cols: 80,
      rows: 24,
      onData: (data) => {
        screen += decoder.decode(data);
      },
    });
    await sandbox.pty.resize(pty.pid, { cols: 132, rows: 40 });
    await sandbox.pty.sendInput(pty.pid, new TextEncoder().encode("stty size; echo pty-$((6*7))\n"));
    await expect.poll(() => screen, { timeout: 10_000 }).toMatch(/40 132/);
    await expect.poll(() => screen, { timeout: 10_000 }).toMatch(/pty-42/);
    expect(await sandbox.pty.kill(pty.pid)).toBe(true);
  });

  it("writes, reads, lists, moves and removes files, and reports a watched directory's changes", async () => {
    const dir = `/tmp/e2b-files-${Date.now()}`;
    expect(await sandbox.files.makeDir(dir)).toBe(true);
    const events: { type: string; name: string }[] = [];
    const watch = await sandbox.files.watchDir(dir, (event) => {
      events.push({ type: event.type, name: event.name });
    });
    await sandbox.files.write(`${dir}/a.txt`, "héllo wörld\n");
    expect(await sandbox.files.read(`${dir}/a.txt`)).toBe("héllo wörld\n");
    await sandbox.files.rename(`${dir}/a.txt`, `${dir}/b.txt`);
    expect(await sandbox.files.exists(`${dir}/a.txt`)).toBe(false);
    expect(await sandbox.files.getInfo(`${dir}/b.txt`)).toMatchObject({
      name: "b.txt",
      type: "file",
      size: Buffer.byteLength("héllo wörld\n"),
    });
    expect((await sandbox.files.list(dir)).map((e) => e.name)).toEqual(["b.txt"]);
    await sandbox.files.remove(`${dir}/b.txt`);
    await expect
      .poll(() => events.map((e) => `${e.type} ${e.name}`), { timeout: 10_000 })
      .toEqual(expect.arrayContaining(["create a.txt", "remove b.txt"]));
    await watch.stop();
  });

  it("uploads and downloads 50 MB, the same bytes each way", async () => {
    const data = randomBytes(50 * 1024 * 1024);
    const digest = createHash("sha256").update(data).digest("hex");
    await sandbox.files.write("/tmp/big.bin", new Blob([data]));
    const check = await sandbox.commands.run("sha256sum /tmp/big.bin");
    expect(check.stdout.split(" ")[0]).toBe(digest);
    const back = await sandbox.files.read("/tmp/big.bin", { format: "bytes" });
    expect(createHash("sha256").update(back).digest("hex")).toBe(digest);
  }, 120_000);

  it("pauses and connects again with its processes and files as they were; without memory, its files only", async () => {
    const started = await sandbox.commands.run("sleep 1000", { background: true });
    await sandbox.files.write("/tmp/kept.txt", "kept across a pause\n");
    expect(await sandbox.pause()).toBe(true);
    expect((await vmOf(sandbox.sandboxId)).status).toBe("hibernated");
    const again = await Sandbox.connect(sandbox.sandboxId, { ...opts(), timeoutMs: 600_000 });
    // The same process, still running; the environment handed to envd again.
    expect((await again.commands.run(`kill -0 ${started.pid} && echo alive`)).stdout).toBe("alive\n");
    expect((await again.commands.run('echo "$GREETING"')).stdout).toBe("hello from e2b\n");
    expect(await again.files.read("/tmp/kept.txt")).toBe("kept across a pause\n");

    expect(await again.pause({ keepMemory: false })).toBe(true);
    const rebooted = await Sandbox.connect(sandbox.sandboxId, { ...opts(), timeoutMs: 600_000 });
    expect(await rebooted.files.read("/tmp/kept.txt")).toBe("kept across a pause\n");
    const gone = await rebooted.commands.run(`kill -0 ${started.pid} 2>/dev/null && echo alive || echo gone`);
    expect(gone.stdout).toBe("gone\n");
    expect(await rebooted.isRunning()).toBe(true);
  }, 180_000);

  it("refuses envd calls without the sandbox's access token", async () => {
    const headers = { "e2b-sandbox-id": sandbox.sandboxId, "e2b-sandbox-port": "49983" };
    const without = await rawRequest(e2bUrl, "GET", "/envs", headers);
    expect(without.status).toBe(401);
    // The token is the sandbox's, as the control plane gives it (GET /sandboxes/{id}).
    const detail = await rawRequest(e2bUrl, "GET", `/sandboxes/${sandbox.sandboxId}`, {
      "x-api-key": E2B_KEY,
    });
    const token = JSON.parse(detail.body).envdAccessToken as string;
    expect(token).toMatch(/^[\w-]{20,}$/);
    const withToken = await rawRequest(e2bUrl, "GET", "/envs", { ...headers, "x-access-token": token });
    expect(withToken.status).toBe(200);
    expect(JSON.parse(withToken.body)).toMatchObject({ GREETING: "hello from e2b" });
    // The SDK with another token is refused with its own class.
    const Ctor = Sandbox as unknown as new (o: object) => Sandbox;
    const impostor = new Ctor({
      ...opts(),
      sandboxId: sandbox.sandboxId,
      envdVersion: "0.6.4",
      envdAccessToken: "wrong",
    });
    await expect(impostor.commands.run("true")).rejects.toThrow(AuthenticationError);
  });
});

describe("@e2b/desktop on the desktop template", () => {
  let desktop: DesktopSandbox;
  let vm: { name: string; computerServerUrl: string | null; apiKey?: string };
  beforeAll(async () => {
    desktop = await DesktopSandbox.create({ ...opts(), timeoutMs: 600_000, resolution: [1024, 768] });
    vm = await vmOf(desktop.sandboxId);
  }, 300_000);
  afterAll(async () => {
    await desktop?.kill();
  });

  it("starts Xvfb and Xfce through envd; Hangar's own server drives the same display", async () => {
    expect(await desktop.getScreenSize()).toEqual({ width: 1024, height: 768 });
    const shot = await desktop.screenshot();
    expect(pngSize(Buffer.from(shot).toString("base64"))).toEqual({ width: 1024, height: 768 });
    const hangarShot = await desktopCommand(vm, "screenshot", { format: "png" });
    expect(hangarShot.result.success).toBe(true);
    expect(pngSize(hangarShot.result.content.image_data)).toEqual({ width: 1024, height: 768 });
  });

  it("moves and clicks the mouse, scrolls and drags; the pointer is where Hangar sees it", async () => {
    await desktop.leftClick(300, 200);
    expect(await desktop.getCursorPosition()).toEqual({ x: 300, y: 200 });
    expect((await desktopCommand(vm, "get_cursor_position")).result.content.position).toEqual({
      x: 300,
      y: 200,
    });
    await desktop.moveMouse(500, 400);
    expect((await desktopCommand(vm, "get_cursor_position")).result.content.position).toEqual({
      x: 500,
      y: 400,
    });
    await desktop.drag([100, 100], [220, 180]);
    expect(await desktop.getCursorPosition()).toEqual({ x: 220, y: 180 });
    // Scrolling a long file in an editor moves its text: the screen changes.
    await desktop.commands.run("seq 1 500 > /tmp/lines.txt");
    await desktop.commands.run("mousepad /tmp/lines.txt", { background: true });
    // The editor's mapped window, once there is one (a search can also find a window of its start
    // that is gone by the next call: the id found is the one used).
    let windowId = "";
    await expect
      .poll(
        async () => {
          const found = await desktop.commands.run("xdotool search --onlyvisible --name lines.txt || true");
          windowId = found.stdout.trim().split("\n")[0];
          return windowId;
        },
        { timeout: 30_000 },
      )
      .not.toBe("");
    await desktop.commands.run(
      `xdotool windowactivate --sync ${windowId} windowsize --sync ${windowId} 800 600`,
    );
    const geometry = (await desktop.commands.run(`xdotool getwindowgeometry ${windowId}`)).stdout;
    const [, wx, wy] = /Position: (\d+),(\d+)/.exec(geometry) ?? [];
    await desktop.moveMouse(Number(wx) + 300, Number(wy) + 300);
    const before = await desktop.screenshot();
    await desktop.scroll("down", 10);
    await expect
      .poll(async () => Buffer.compare(Buffer.from(before), Buffer.from(await desktop.screenshot())), {
        timeout: 10_000,
      })
      .not.toBe(0);
  });

  // Accented letters: the template's Xvfb puts them on keys, so xdotool types them without its
  // momentary remap. CJK through `xdotool type` can drop a character on a loaded machine (xdotool
  // undoes its remap before the editor reads the key, as on E2B's own template); the computer
  // server's type_text keeps its remapped keys and is tested with CJK in x11-keyboard.test.ts.
  it("types accented text and presses keys into a focused editor; the file says what was typed", async () => {
    await desktop.commands.run(": > /tmp/typed.txt");
    await desktop.commands.run("mousepad /tmp/typed.txt", { background: true });
    await expect
      .poll(
        async () => (await desktop.commands.run("xdotool search --name typed.txt || true")).stdout.trim(),
        {
          timeout: 30_000,
        },
      )
      .not.toBe("");
    const windowId = (await desktop.commands.run("xdotool search --name typed.txt")).stdout
      .trim()
      .split("\n")[0];
    await desktop.commands.run(`xdotool windowactivate --sync ${windowId}`);
    await desktop.write("héllo wörld: ça, à, è, Zürich, Ñandu, Äpfel");
    await desktop.press("enter");
    await desktop.write("second line");
    await desktop.press(["ctrl", "s"]);
    await expect
      .poll(async () => (await desktop.files.read("/tmp/typed.txt")).trimEnd(), { timeout: 15_000 })
      .toBe("héllo wörld: ça, à, è, Zürich, Ñandu, Äpfel\nsecond line");
    // Mousepad's start alone can take most of the default 30 s on a loaded machine.
  }, 120_000);

  it("opens a file in its application", async () => {
    await desktop.files.write("/tmp/opened.txt", "opened by xdg-open\n");
    await desktop.open("/tmp/opened.txt");
    await expect
      .poll(
        async () => (await desktop.commands.run("xdotool search --name opened.txt || true")).stdout.trim(),
        {
          timeout: 30_000,
        },
      )
      .not.toBe("");
  });

  it("streams the screen with noVNC: its URL answers through the per-port route, with the token", async () => {
    await desktop.stream.start();
    const url = new URL(desktop.stream.getUrl());
    // The SDK builds an https URL (E2B's cloud serves TLS); this listener is plain HTTP on loopback.
    expect(url.host).toBe(desktop.getHost(6080));
    expect(url.pathname).toBe("/vnc.html");
    const token = desktop.trafficAccessToken as string;
    const page = await viaLoopback(url.host, "GET", `${url.pathname}${url.search}`, {
      "e2b-traffic-access-token": token,
    });
    expect(page.status).toBe(200);
    expect(page.body).toMatch(/noVNC/);
    expect((await viaLoopback(url.host, "GET", "/vnc.html")).status).toBe(403);
    // websockify's socket gives the VNC server's greeting.
    const socket = await openSocket(`ws://${url.host}/websockify`, { "e2b-traffic-access-token": token });
    if (!("ws" in socket)) throw new Error(`refused: ${JSON.stringify(socket)}`);
    const greeting = await new Promise<Buffer>((resolve) =>
      socket.ws.once("message", (data: Buffer) => resolve(data)),
    );
    expect(greeting.toString()).toMatch(/^RFB 003\.00\d\n/);
    socket.ws.close();
    await desktop.stream.stop();
  });
});
