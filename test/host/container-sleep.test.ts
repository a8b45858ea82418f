/**
 * Container desktops asleep, through a real engine (podman.ts) and the project's image: `paused`
 * (the engine's freezer: processes and their memory kept) and `disk` (stopped with the writable
 * layer: files kept, processes not), each resumed explicitly and by a request to the desktop's own
 * address, which is answered; a screenshot answers after each. Bad requests are 409s and 400s that
 * change nothing; a paused desktop is still woken by a request after a restart of the service.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { desktopCommand, pngSize } from "./desktop-client.js";
import { startPodman, TEST_IMAGE, type TestEngine, testUlimits } from "./podman.js";
import { LINUX_VM, startTestHost, type TestHost } from "./support.js";

let engine: TestEngine;
let host: TestHost;
let pid = "";

beforeAll(async () => {
  engine = await startPodman();
  host = await startTestHost({
    containerEngine: engine.address,
    desktopImage: TEST_IMAGE,
    containerUlimits: testUlimits(),
    defaultRuntime: "container",
  });
  expect((await host.api("POST", "/svc/vms", { name: "nap", ...LINUX_VM })).status).toBe(200);
  expect((await host.api("POST", "/svc/vms", { name: "still", ...LINUX_VM })).status).toBe(200);
  expect((await host.api("POST", "/svc/vms/nap/run", {})).status).toBe(202);
  const ready = await host.api("GET", "/svc/vms/nap?wait=ready&timeout=120");
  expect(ready.status, ready.text).toBe(200);
  const shell = (command: string) => desktopCommand(ready.body, "run_command", { command });
  // What each mode keeps: a running process (memory), a file in /tmp and one in the home (disk).
  const started = await shell("setsid sleep 100000 >/dev/null 2>&1 < /dev/null & echo $!");
  pid = String(started.result.content.stdout).trim();
  expect(pid).toMatch(/^\d+$/);
  await shell("echo in-tmp > /tmp/kept.txt; echo in-home > ~/kept.txt");
}, 180_000);
afterAll(async () => {
  await host?.cleanup();
  await engine?.cleanup();
});

const record = async (name: string) => (await host.api("GET", `/svc/vms/${name}`)).body;
/**
 * Whether the process started at the beginning still runs. Pids are reused after a restart, by
 * this very check's shell too (whose command line holds the words looked for): the program's name
 * is asked, and then its arguments.
 */
const sleeper = () =>
  shell(
    `[ "$(cat /proc/${pid}/comm 2>/dev/null)" = sleep ] && tr '\\0' ' ' < /proc/${pid}/cmdline | grep -q '100000' && echo alive || echo gone`,
  );
const shell = async (command: string) => {
  const out = await desktopCommand(await record("nap"), "run_command", { command });
  expect(out.result.success, JSON.stringify(out.result)).toBe(true);
  return String(out.result.content.stdout).trim();
};
const engineState = async () =>
  (await engine.podman("inspect", "--format", "{{.State.Status}}", "hangar-nap")).trim();
const screenshotAnswers = async () => {
  const shot = await desktopCommand(await record("nap"), "screenshot", { format: "png" }, 60_000);
  expect(shot.result.success).toBe(true);
  expect(pngSize(shot.result.content.image_data).width).toBeGreaterThan(0);
};
const wokeLines = () =>
  readFileSync(join(host.home, ".logs", "info.log"), "utf8")
    .split("\n")
    .filter((line) => line.includes("Desktop woke on a request") && line.includes("nap")).length;

describe("paused: the engine's freezer", () => {
  it("keeps the processes and the address; resume brings back a desktop that answers", async () => {
    const awake = await record("nap");
    const slept = await host.api("POST", "/svc/vms/nap/hibernate", {});
    expect(slept.status, slept.text).toBe(200);
    expect(slept.body).toMatchObject({
      status: "hibernated",
      hibernation: "paused",
      ready: false,
      computerServerUrl: awake.computerServerUrl,
      vncUrl: awake.vncUrl,
    });
    expect(await engineState()).toBe("paused");

    const resumed = await host.api("POST", "/svc/vms/nap/resume?wait=ready&timeout=60", {});
    expect(resumed.status, resumed.text).toBe(200);
    expect(resumed.body).toMatchObject({
      status: "running",
      ready: true,
      computerServerUrl: awake.computerServerUrl,
    });
    expect(await engineState()).toBe("running");
    await screenshotAnswers();
    expect(await sleeper()).toBe("alive");
  });

  it("a request to a paused desktop wakes it and is answered", async () => {
    const before = wokeLines();
    expect((await host.api("POST", "/svc/vms/nap/hibernate", {})).status).toBe(200);
    expect(await engineState()).toBe("paused");
    await screenshotAnswers();
    expect((await record("nap")).status).toBe("running");
    await expect.poll(wokeLines).toBe(before + 1);
    expect(await sleeper()).toBe("alive");
  });

  it("is still woken by a request after a restart of the host service", async () => {
    expect((await host.api("POST", "/svc/vms/nap/hibernate", {})).status).toBe(200);
    await host.restart();
    expect((await record("nap")).status).toBe("hibernated");
    await screenshotAnswers();
    expect((await record("nap")).status).toBe("running");
  });
});

describe("disk: stopped with its files", () => {
  it("keeps the files and the ports, not the processes; a request wakes it, marked", async () => {
    const awake = await record("nap");
    const slept = await host.api("POST", "/svc/vms/nap/hibernate", { mode: "disk" });
    expect(slept.status, slept.text).toBe(200);
    expect(slept.body).toMatchObject({
      status: "hibernated",
      hibernation: "disk",
      computerServerUrl: awake.computerServerUrl,
      forwardedPorts: awake.forwardedPorts,
    });
    expect(await engineState()).toBe("exited");

    const res = await fetch(new URL("/cmd", awake.computerServerUrl), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ command: "screenshot", params: { format: "png" } }),
      signal: AbortSignal.timeout(120_000),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-hangar-woke")).toBe("1");
    expect(await res.text()).toContain('"success":true');
    expect((await record("nap")).status).toBe("running");
    expect(await shell("cat /tmp/kept.txt ~/kept.txt")).toBe("in-tmp\nin-home");
    expect(await sleeper()).toBe("gone");
  });

  it("resume on request; stop of a sleeping desktop leaves it stopped", async () => {
    expect((await host.api("POST", "/svc/vms/nap/hibernate", { mode: "disk" })).status).toBe(200);
    const resumed = await host.api("POST", "/svc/vms/nap/resume?wait=ready&timeout=120", {});
    expect(resumed.status, resumed.text).toBe(200);
    await screenshotAnswers();
    expect((await host.api("POST", "/svc/vms/nap/hibernate", { mode: "disk" })).status).toBe(200);
    expect((await host.api("POST", "/svc/vms/nap/stop", {})).status).toBe(200);
    expect((await record("nap")).status).toBe("stopped");
    const again = await host.api("POST", "/svc/vms/nap/resume", {});
    expect(again.status).toBe(409);
  });
});

describe("bad requests change nothing", () => {
  it("hibernating a stopped desktop, resuming one that does not sleep, a mode it has not", async () => {
    const stopped = await host.api("POST", "/svc/vms/still/hibernate", {});
    expect(stopped.status).toBe(409);
    expect(stopped.body.message).toBe("Cannot hibernate still: it is not running");
    expect((await record("still")).status).toBe("stopped");
    const notAsleep = await host.api("POST", "/svc/vms/still/resume", {});
    expect(notAsleep.status).toBe(409);
    expect(notAsleep.body.message).toBe("Cannot resume still: it is not hibernated (run it instead)");
    const memory = await host.api("POST", "/svc/vms/still/hibernate", { mode: "memory" });
    expect(memory.status).toBe(400);
    expect(memory.body.message).toBe("A container desktop hibernates with 'paused' or 'disk', not 'memory'");
    expect((await record("still")).status).toBe("stopped");
  });
});
