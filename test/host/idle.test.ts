/**
 * Auto-pause when idle, with container desktops through a real engine (podman.ts): a desktop left
 * alone is hibernated once its idleTimeout has passed (the event says why), one with an xterm
 * printing is not, nor one with a live viewer (`WS /live`) until the viewer goes; a `/cmd` to a
 * paused desktop wakes it and is answered. Bad timeouts are 400s that change nothing.
 *
 * The desktops run the project's image with this checkout's built `dist/` laid over it (one COPY
 * layer, built here in the test's own engine storage), so that the computer server they run is the
 * one under test (`GET /activity/idle`).
 */
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { LifecycleEvent } from "../../src/host/events.js";
import { desktopCommand } from "./desktop-client.js";
import { startPodman, TEST_IMAGE, type TestEngine, testUlimits } from "./podman.js";
import { LINUX_VM, startTestHost, type TestHost } from "./support.js";

const IMAGE = "localhost/hangar:idle-test";
let engine: TestEngine;
let host: TestHost;
let context: string;

beforeAll(async () => {
  engine = await startPodman();
  context = mkdtempSync(join(tmpdir(), "hangar-idle-image-"));
  cpSync(join(import.meta.dirname, "../../dist"), join(context, "dist"), { recursive: true });
  writeFileSync(join(context, "Containerfile"), `FROM ${TEST_IMAGE}\nCOPY dist /opt/hangar/dist\n`);
  await engine.podman("build", "--pull=never", "-t", IMAGE, "-f", join(context, "Containerfile"), context);
  host = await startTestHost({
    containerEngine: engine.address,
    desktopImage: IMAGE,
    containerUlimits: testUlimits(),
    defaultRuntime: "container",
  });
  for (const name of ["alone", "busy"]) {
    expect((await host.api("POST", "/svc/vms", { name, ...LINUX_VM })).status).toBe(200);
    expect((await host.api("POST", `/svc/vms/${name}/run`, {})).status).toBe(202);
  }
  for (const name of ["alone", "busy"]) {
    const ready = await host.api("GET", `/svc/vms/${name}?wait=ready&timeout=180`);
    expect(ready.status, ready.text).toBe(200);
  }
}, 400_000);
afterAll(async () => {
  await host?.cleanup();
  await engine?.cleanup();
  if (context) rmSync(context, { recursive: true, force: true });
});

const record = async (name: string) => (await host.api("GET", `/svc/vms/${name}`)).body;
const shell = async (name: string, command: string) => {
  const out = await desktopCommand(await record(name), "run_command", { command });
  expect(out.result.success, JSON.stringify(out.result)).toBe(true);
  return String(out.result.content.stdout).trim();
};
const activity = async (name: string) => {
  const vm = await record(name);
  const res = await fetch(new URL("/activity/idle", vm.computerServerUrl), {
    headers: vm.apiKey ? { "x-api-key": vm.apiKey } : {},
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { idle_s: number; screen_s: number | null; viewers: number; busy: boolean };
};
/** The desktop's next event of this type (from the service's event stream). */
const nextEvent = (type: LifecycleEvent["type"], name: string, timeoutMs = 60_000) =>
  new Promise<LifecycleEvent>((resolve, reject) => {
    const timer = setTimeout(() => {
      stop();
      reject(new Error(`no ${type} event of ${name} within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    const stop = host.service.services.events.subscribe((event) => {
      if (event.type !== type || event.desktop !== name) return;
      clearTimeout(timer);
      stop();
      resolve(event);
    });
  });
const setTimeoutOf = async (name: string, idleTimeout: unknown) => {
  const res = await host.api("PATCH", `/svc/vms/${name}`, { idleTimeout });
  expect(res.status, res.text).toBe(200);
};

describe("idleTimeout", () => {
  it("bad timeouts are 400s that change nothing", async () => {
    const made = await host.api("POST", "/svc/vms", { name: "never", ...LINUX_VM, idleTimeout: "0s" });
    expect(made.status).toBe(400);
    expect(made.text).toMatch(/idleTimeout/);
    expect((await host.api("GET", "/svc/vms/never")).text).toMatch(/not found/);
    for (const bad of [-5, "0s", "soon", 1.5]) {
      const res = await host.api("PATCH", "/svc/vms/alone", { idleTimeout: bad });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.text).toMatch(/idleTimeout/);
    }
    expect((await record("alone")).idleTimeout).toBeNull();
    expect((await record("alone")).status).toBe("running");
  });

  it("pauses the desktop left alone, not the one with an xterm printing", async () => {
    await shell(
      "busy",
      "setsid xterm -geometry 80x24+0+0 -e sh -c 'while :; do date +%s.%N; sleep 0.1; done' >/dev/null 2>&1 < /dev/null & echo started",
    );
    await expect
      .poll(async () => (await activity("busy")).screen_s ?? 99, { timeout: 30_000 })
      .toBeLessThan(1);
    const paused = nextEvent("hibernate", "alone");
    await setTimeoutOf("busy", "3s");
    await setTimeoutOf("alone", "3s");
    expect((await record("alone")).idleTimeout).toBe(3);
    const event = await paused;
    expect(event.reason).toMatch(/^idle for \d+ s \(idleTimeout 3 s\)/);
    expect((await record("alone")).status).toBe("hibernated");
    // The busy one had its timeout as long: it runs on, for two more seconds of looks at least.
    const until = Date.now() + 2000;
    while (Date.now() < until) expect((await record("busy")).status).toBe("running");
    expect((await activity("busy")).idle_s).toBeLessThan(3);
  });

  it("a /cmd to the paused desktop wakes it and is answered", async () => {
    const vm = await record("alone");
    expect(vm.status).toBe("hibernated");
    const woke = nextEvent("resume", "alone");
    const res = await fetch(new URL("/cmd", vm.computerServerUrl), {
      method: "POST",
      headers: { "content-type": "application/json", ...(vm.apiKey ? { "x-api-key": vm.apiKey } : {}) },
      body: JSON.stringify({ command: "get_screen_size", params: {} }),
      signal: AbortSignal.timeout(120_000),
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('"success":true');
    expect((await woke).woke).toBeTruthy();
    expect((await record("alone")).status).toBe("running");
  });

  it("a live viewer keeps a desktop awake; once it goes, the desktop is paused", async () => {
    await shell("busy", "pkill -f 'date +%s' ; pkill xterm ; echo stopped");
    const vm = await record("busy");
    const viewer = new WebSocket(`${vm.computerServerUrl.replace("http", "ws")}/live`, {
      headers: vm.apiKey ? { "x-api-key": vm.apiKey } : {},
    });
    await new Promise((resolve, reject) => {
      viewer.once("open", resolve);
      viewer.once("error", reject);
    });
    try {
      await expect.poll(async () => (await activity("busy")).viewers).toBe(1);
      // "alone" (woken by the last test, the same timeout) sleeps again; the watched one does not.
      await nextEvent("hibernate", "alone");
      expect((await record("busy")).status).toBe("running");
    } finally {
      viewer.close();
    }
    const event = await nextEvent("hibernate", "busy");
    expect(event.reason).toMatch(/idleTimeout 3 s/);
    expect((await record("busy")).status).toBe("hibernated");
  });

  it('"off" turns it off', async () => {
    await setTimeoutOf("busy", "off");
    expect((await record("busy")).idleTimeout).toBeNull();
  });

  it('idleMode "disk": the idle desktop stops with its files (no memory held), and a /cmd starts it again', async () => {
    const memory = await host.api("PATCH", "/svc/vms/alone", { idleMode: "memory" });
    expect(memory.status).toBe(400);
    expect(memory.body.message).toBe("A container desktop hibernates with 'paused' or 'disk', not 'memory'");
    const res = await host.api("PATCH", "/svc/vms/alone", { idleMode: "disk" });
    expect(res.status, res.text).toBe(200);
    expect((await record("alone")).idleMode).toBe("disk");
    // Paused by the test before; this command wakes it, and it falls idle again.
    const slept = nextEvent("hibernate", "alone", 120_000);
    expect(await shell("alone", "echo kept-$((6*7)) > ~/idle-note && echo written")).toBe("written");
    expect((await slept).mode).toBe("disk");
    expect((await record("alone")).hibernation).toBe("disk");
    const running = await engine.podman("ps", "--format", "{{.Names}}");
    expect(running.split("\n").filter((n) => n.includes("alone"))).toEqual([]);
    expect(await shell("alone", "cat ~/idle-note")).toBe("kept-42");
    expect((await record("alone")).status).toBe("running");
    await setTimeoutOf("alone", "off");
  }, 300_000);

  it("a claimed pool desktop follows its pool's idleTimeout; a /cmd wakes it, still claimed", async () => {
    // Room for the pool's desktop on two cores: the two above go.
    for (const name of ["alone", "busy"])
      expect((await host.api("DELETE", `/svc/vms/${name}`)).status).toBe(200);
    const made = await host.api("POST", "/svc/pools", {
      name: "idlers",
      size: 1,
      runtime: "container",
      idleTimeout: "3s",
      ttl: 600,
    });
    expect(made.status, made.text).toBe(201);
    const claimed = await host.api("POST", "/svc/pools/idlers/claim", { timeout: 300 });
    expect(claimed.status, claimed.text).toBe(200);
    const name = claimed.body.name as string;
    expect((await record(name)).idleTimeout).toBeNull();
    const event = await nextEvent("hibernate", name, 120_000);
    expect(event.reason).toMatch(/idleTimeout 3 s/);
    const member = async () =>
      (await host.api("GET", "/svc/pools/idlers")).body.desktops.find(
        (m: { name: string }) => m.name === name,
      );
    await expect.poll(async () => (await member())?.state).toBe("claimed");
    await expect.poll(async () => (await member())?.leaseLeftMs ?? null).not.toBeNull();
    const out = await desktopCommand(await record(name), "get_screen_size", {}, 120_000);
    expect(out.result.success).toBe(true);
    expect((await record(name)).status).toBe("running");
    expect((await member())?.state).toBe("claimed");
    expect((await host.api("POST", `/svc/vms/${name}/release`, {})).status).toBe(200);
    expect((await host.api("DELETE", "/svc/pools/idlers")).status).toBe(200);
  }, 400_000);
});
