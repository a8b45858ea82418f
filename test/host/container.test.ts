/**
 * Container desktops through a real engine: podman's API service, started here (podman.ts), and
 * real containers of the project's image whose computer servers are driven with screenshots,
 * clicks and commands. The lume routes are run alike for both runtimes (QEMU with a blank disk,
 * as the other host tests do); then what only containers have: readiness, the desktop's files
 * kept across new limits and clones, the engine as the record after a restart, the engine gone
 * and back, and bad input refused before anything is started.
 */
import { existsSync, readdirSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ephemeralRange } from "../../src/host/container/published-ports.js";
import { desktopCommand, expectControllerOutOfReach, pngSize } from "./desktop-client.js";
import { startPodman, TEST_IMAGE, type TestEngine, testUlimits } from "./podman.js";
import { LINUX_VM, startTestHost, type TestHost } from "./support.js";

let engine: TestEngine;
let host: TestHost;

beforeAll(async () => {
  engine = await startPodman();
  host = await startTestHost({
    containerEngine: engine.address,
    desktopImage: TEST_IMAGE,
    containerUlimits: testUlimits(),
  });
}, 120_000);
afterAll(async () => {
  await host?.cleanup();
  await engine?.cleanup();
});

const get = async (name: string) => (await host.api("GET", `/svc/vms/${name}`)).body;
const containers = async () =>
  (await engine.podman("ps", "--all", "--format", "{{.Names}}")).split("\n").filter(Boolean).sort();

describe.each(["qemu", "container"] as const)("the lume routes for a %s desktop", (runtime) => {
  const name = `routes-${runtime}`;
  const copy = `${name}-copy`;
  it("create, get, list, run (202), logs, stop, clone, PATCH cpu and memory, delete", async () => {
    const created = await host.api("POST", "/svc/vms", { name, ...LINUX_VM, runtime });
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ name, status: "stopped", runtime });
    expect(await get(name)).toMatchObject({
      name,
      runtime,
      status: "stopped",
      cpuCount: 1,
      memorySize: 256 * 1024 ** 2,
    });
    const list = await host.api("GET", "/svc/vms");
    expect(list.body.map((vm: { name: string }) => vm.name)).toContain(name);

    const run = await host.api("POST", `/svc/vms/${name}/run`, {});
    expect(run.status).toBe(202);
    expect(run.body).toEqual({ message: "VM start initiated", name, status: "pending" });
    expect((await get(name)).status).toBe("running");
    const again = await host.api("POST", `/svc/vms/${name}/run`, {});
    expect(again.status).toBe(400);
    expect(again.body.message).toMatch(/already running/);
    const logs = await fetch(`${host.url}/svc/vms/${name}/logs?lines=5`);
    expect(logs.status).toBe(200);
    await logs.text();

    const stop = await host.api("POST", `/svc/vms/${name}/stop`, {});
    expect(stop.status).toBe(200);
    expect((await get(name)).status).toBe("stopped");

    const clone = await host.api("POST", "/svc/vms/clone", { name, newName: copy });
    expect(clone.status).toBe(200);
    expect(await get(copy)).toMatchObject({ name: copy, runtime, status: "stopped" });

    const patch = await host.api("PATCH", `/svc/vms/${copy}`, { cpu: 2, memory: "512MB" });
    expect(patch.status).toBe(200);
    expect(await get(copy)).toMatchObject({ cpuCount: 2, memorySize: 512 * 1024 ** 2, runtime });

    for (const vm of [name, copy]) expect((await host.api("DELETE", `/svc/vms/${vm}`)).status).toBe(200);
    expect((await host.api("GET", `/svc/vms/${name}`)).status).toBe(400);
    if (runtime === "container") expect(await containers()).not.toContain(`hangar-${name}`);
  }, 120_000);
});

describe("a container desktop", () => {
  it("runs the project's image: ready, screenshots, clicks and commands; its files survive new limits and clones; found again after a restart", async () => {
    const body = { name: "desk", os: "linux", cpu: 1, memory: "1GB", diskSize: "4GB", display: "1024x768" };
    expect((await host.api("POST", "/svc/vms", { ...body, runtime: "container" })).status).toBe(200);
    expect(await containers()).toContain("hangar-desk");
    const labels = await engine.podman("inspect", "hangar-desk", "--format", "{{json .Config.Labels}}");
    expect(JSON.parse(labels)).toMatchObject({
      "dev.hangar.desktop": "desk",
      "dev.hangar.display": "1024x768",
    });

    expect((await host.api("POST", "/svc/vms/desk/run", {})).status).toBe(202);
    const ready = await host.api("GET", "/svc/vms/desk?wait=ready&timeout=90");
    expect(ready.status).toBe(200);
    const vm = ready.body;
    expect(vm).toMatchObject({ ready: true, status: "running", runtime: "container", image: TEST_IMAGE });
    expect(vm.computerServerUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(vm.vncUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/vnc\.html\?autoconnect=1&password=\S+$/);
    // OSWorld's controller port (the image serves it there, docs/osworld.md), on loopback too.
    expect(vm.forwardedPorts["5000"]).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(vm.startMs).toBeGreaterThan(0);

    const shot = await desktopCommand(vm, "screenshot", { format: "png" });
    expect(shot.result.success).toBe(true);
    expect(pngSize(shot.result.content.image_data)).toEqual({ width: 1024, height: 768 });
    expect((await desktopCommand(vm, "left_click", { x: 300, y: 200 })).result.success).toBe(true);
    const cursor = await desktopCommand(vm, "get_cursor_position");
    expect(cursor.result.content.position).toEqual({ x: 300, y: 200 });
    const written = await desktopCommand(vm, "run_command", { command: "echo kept-across > ~/kept.txt" });
    expect(written.result.success).toBe(true);
    // Started as root: the server keeps root, the agent is the desktop user and cannot reach it.
    expect((await engine.podman("inspect", "hangar-desk", "--format", "{{.Config.User}}")).trim()).toBe("0");
    await expectControllerOutOfReach(vm);

    // noVNC's page answers on the published port, and the console reads like `docker logs`.
    const viewer = await fetch(vm.vncUrl);
    expect(viewer.status).toBe(200);
    expect(await viewer.text()).toMatch(/noVNC/i);
    // The server's log is written in the background (pino, flushed every 250 ms): it comes.
    await expect
      .poll(async () => (await fetch(`${host.url}/svc/vms/desk/logs?lines=50`)).text(), { timeout: 10_000 })
      .toMatch(/computer server listening/);

    // Found again by its labels after a restart of the host service.
    await host.restart();
    expect(await get("desk")).toMatchObject({ runtime: "container", status: "running" });
    const again = await host.api("GET", "/svc/vms/desk?wait=ready&timeout=30");
    expect(again.body).toMatchObject({ ready: true, computerServerUrl: vm.computerServerUrl });

    expect((await host.api("POST", "/svc/vms/desk/stop", {})).body.outcome).toBe("powered down");
    const limits = await host.api("PATCH", "/svc/vms/desk", { cpu: 2, memory: "1536MB" });
    expect(limits.status).toBe(200);
    const disk = await host.api("PATCH", "/svc/vms/desk", { diskSize: "8GB" });
    expect(disk.status).toBe(400);
    expect(disk.body.message).toMatch(/diskSize cannot change for a container desktop/);
    expect((await host.api("POST", "/svc/vms/clone", { name: "desk", newName: "desk2" })).status).toBe(200);

    for (const name of ["desk", "desk2"]) {
      expect((await host.api("POST", `/svc/vms/${name}/run`, {})).status).toBe(202);
      const copy = (await host.api("GET", `/svc/vms/${name}?wait=ready&timeout=90`)).body;
      expect(copy).toMatchObject({ ready: true, cpuCount: 2, memorySize: 1536 * 1024 ** 2 });
      const read = await desktopCommand(copy, "run_command", { command: "cat ~/kept.txt" });
      expect(read.result.content.stdout.trim()).toBe("kept-across");
      // Made again (new limits) or copied, it keeps the split: the server root, the agent 10001.
      expect((await engine.podman("inspect", `hangar-${name}`, "--format", "{{.Config.User}}")).trim()).toBe(
        "0",
      );
      expect((await desktopCommand(copy, "run_command", { command: "id -u" })).result.content.stdout).toBe(
        "10001\n",
      );
    }
    for (const name of ["desk", "desk2"])
      expect((await host.api("DELETE", `/svc/vms/${name}`)).status).toBe(200);
    expect((await containers()).filter((c) => c.startsWith("hangar-desk"))).toEqual([]);
    expect(readdirSync(join(host.home, ".containers"))).toEqual([]);
  }, 240_000);

  it("publishes on ports outside the kernel's ephemeral ones, and starts on new ports when one chosen was taken before the run", async () => {
    const body = { name: "taken", os: "linux", cpu: 1, memory: "1GB", diskSize: "4GB", display: "1024x768" };
    expect((await host.api("POST", "/svc/vms", { ...body, runtime: "container" })).status).toBe(200);
    // The service chose the ports when it made the container, from 20000–29999: no port the
    // kernel hands out to other programs. Another program takes the server's all the same.
    const bindings = JSON.parse(
      await engine.podman("inspect", "hangar-taken", "--format", "{{json .HostConfig.PortBindings}}"),
    ) as Record<string, { HostIp: string; HostPort: string }[]>;
    const ephemeral = await ephemeralRange();
    for (const port of ["8000/tcp", "6080/tcp", "5000/tcp"]) {
      const published = Number(bindings[port]?.[0]?.HostPort);
      expect(bindings[port]?.[0]?.HostIp).toBe("127.0.0.1");
      expect(published).toBeGreaterThanOrEqual(20000);
      expect(published).toBeLessThanOrEqual(29999);
      expect(published < ephemeral.first || published > ephemeral.last).toBe(true);
    }
    const chosen = Number(bindings["8000/tcp"]?.[0]?.HostPort);
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(chosen, "127.0.0.1", resolve));
    try {
      expect((await host.api("POST", "/svc/vms/taken/run", {})).status).toBe(202);
      const vm = (await host.api("GET", "/svc/vms/taken?wait=ready&timeout=90")).body;
      expect(vm).toMatchObject({ ready: true, status: "running" });
      expect(vm.computerServerUrl).not.toBe(`http://127.0.0.1:${chosen}`);
      expect((await desktopCommand(vm, "get_screen_size")).result.success).toBe(true);
    } finally {
      squatter.close();
      expect((await host.api("DELETE", "/svc/vms/taken")).status).toBe(200);
    }
  }, 180_000);

  it("refuses bad input with clear 400s and starts nothing", async () => {
    const before = await containers();
    const base = {
      os: "linux",
      cpu: 1,
      memory: "1GB",
      diskSize: "4GB",
      display: "1024x768",
      runtime: "container",
    };
    const cases: [unknown, RegExp][] = [
      [{ ...base, name: "a+b" }, /container name cannot hold \+ or @/],
      [{ ...base, name: "bad-image", image: "debian;rm -rf /" }, /';' is not allowed in an image reference/],
      [{ ...base, name: "bad-image", image: "$(reboot)" }, /'\$' is not allowed/],
      [{ ...base, name: "small", memory: "1MB" }, /at least 64 MiB/],
      [{ ...base, name: "mac", os: "macOS" }, /macOS/],
      [{ ...base, name: "where", storage: "home" }, /no storage location/],
      [{ ...base, name: "nope", runtime: "kube" }, /Unknown runtime 'kube'/],
    ];
    for (const [request, message] of cases) {
      const res = await host.api("POST", "/svc/vms", request);
      expect(res.status, JSON.stringify(request)).toBe(400);
      expect(res.body.message).toMatch(message);
    }
    const pull = await host.api("POST", "/svc/pull", { image: "alpine`id`", runtime: "container" });
    expect(pull.status).toBe(400);
    expect(pull.body.message).toMatch(/'`' is not allowed/);
    expect(await containers()).toEqual(before);
    expect(existsSync(join(host.home, ".containers", "hangar-bad-image"))).toBe(false);
  });

  it("says the engine is gone while it is, and works again once it is back", async () => {
    expect(
      (await host.api("POST", "/svc/vms", { ...LINUX_VM, name: "away", runtime: "container" })).status,
    ).toBe(200);
    await engine.stop();
    const gone = await host.api("GET", "/svc/vms/away");
    expect(gone.status).toBe(400);
    expect(gone.body.message).toMatch(/container engine at unix:\/\/.* does not answer/);
    const create = await host.api("POST", "/svc/vms", { ...LINUX_VM, name: "away2", runtime: "container" });
    expect(create.status).toBe(400);
    // QEMU's VMs stay listed while the engine is away.
    expect((await host.api("GET", "/svc/vms")).status).toBe(200);
    await engine.start();
    expect(await get("away")).toMatchObject({ name: "away", runtime: "container", status: "stopped" });
    expect((await host.api("DELETE", "/svc/vms/away")).status).toBe(200);
  }, 60_000);
});
