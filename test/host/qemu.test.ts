/**
 * VMs run by real QEMU (TCG or KVM, small memory, firmware only: OVMF boots to its shell on an
 * empty disk). Every QEMU started here is killed in afterAll.
 */
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { QmpClient } from "../../src/host/qemu/qmp.js";
import { eventually, LINUX_VM, startTestHost, type TestHost } from "./support.js";

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
  for (const name of ["vm1", "vm2"]) {
    expect((await host.api("POST", "/svc/vms", { name, ...LINUX_VM })).status).toBe(200);
  }
});
afterAll(async () => {
  await host.cleanup();
});

const get = async (name: string) => (await host.api("GET", `/svc/vms/${name}`)).body;
const session = (name: string) => JSON.parse(readFileSync(join(host.home, name, "session.json"), "utf8"));
/** True while the process exists and is not a zombie waiting to be reaped. */
const alive = (pid: number) => {
  try {
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
};

async function runAndWait(name: string, body: unknown = {}) {
  const started = Date.now();
  const res = await host.api("POST", `/svc/vms/${name}/run`, body);
  expect(res.status).toBe(202);
  expect(res.body).toEqual({ message: "VM start initiated", name, status: "pending" });
  expect(Date.now() - started).toBeLessThan(1000);
  return eventually(async () => {
    const vm = await get(name);
    return vm.status === "running" && vm.ipAddress ? vm : undefined;
  });
}

/** The first bytes a server sends on connect. */
function banner(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    socket.once("data", (chunk) => {
      socket.destroy();
      resolve(chunk.toString("latin1"));
    });
    socket.once("error", reject);
    socket.setTimeout(3000, () => socket.destroy(new Error("no banner")));
  });
}

describe("QEMU lifecycle", () => {
  it("create → run → running with VNC and QMP → stop → stopped", async () => {
    const notYet = await host.api("GET", "/svc/vms/vm1?wait=ready&timeout=5");
    expect([notYet.status, notYet.body.message]).toEqual([400, "Virtual machine vm1 is not running"]);
    const vm = await runAndWait("vm1");
    expect(vm).toMatchObject({ runtime: "qemu", ready: false, readyAt: null, startMs: null });
    expect(Date.parse(vm.startedAt)).toBeGreaterThan(Date.now() - 60_000);
    // Firmware on an empty disk: no computer server will answer, and a wait says so.
    const wait = await host.api("GET", "/svc/vms/vm1?wait=ready&timeout=0.5");
    expect(wait.status).toBe(400);
    expect(wait.body.message).toMatch(/^Virtual machine vm1 was not ready after 0.5 s/);
    const badWait = await host.api("GET", "/svc/vms/vm1?wait=soon");
    expect([badWait.status, badWait.body.message]).toEqual([
      400,
      "Invalid query parameter wait: expected ready",
    ]);
    // Its console (the serial port) as text, like `docker logs`.
    const serial = await fetch(`${host.url}/svc/vms/vm1/logs?lines=5`);
    expect(serial.status).toBe(200);
    expect(serial.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect((await serial.text()).split("\n").filter(Boolean).length).toBeLessThanOrEqual(5);
    // In the service's own loopback network (each test's service has one: support.ts).
    expect(vm.ipAddress).toMatch(
      new RegExp(`^${host.options.loopbackNetwork?.replaceAll(".", "\\.")}\\.\\d+$`),
    );
    expect(vm.computerServerUrl).toBe(`http://${vm.ipAddress}:8000`);
    // VNC on the VM's own address too: 5900 there is its alone.
    expect(vm.vncUrl).toMatch(new RegExp(`^vnc://:[a-z0-9]{8}@${vm.ipAddress.replaceAll(".", "\\.")}:5900$`));
    expect(vm.sharedDirectories).toEqual([]);

    const s = session("vm1");
    const qmp = await QmpClient.connect(s.qmpSocket);
    const status = await qmp.execute<{ status: string }>("query-status");
    qmp.close();
    expect(["running", "paused"]).toContain(status.status);

    const vncPort = Number(/:(\d+)$/.exec(vm.vncUrl)![1]);
    expect(await banner(vm.ipAddress, vncPort)).toMatch(/^RFB 003\.00\d/);

    // Forwarded ports listen on the VM's own loopback address.
    await new Promise<void>((resolve, reject) => {
      const socket = connect({ host: vm.ipAddress, port: 8000 }, () => {
        socket.destroy();
        resolve();
      });
      socket.once("error", reject);
    });

    const again = await host.api("POST", "/svc/vms/vm1/run", {});
    expect([again.status, again.body.message]).toEqual([400, "Virtual machine already running: vm1"]);
    const patch = await host.api("PATCH", "/svc/vms/vm1", { cpu: 2 });
    expect([patch.status, patch.body.message]).toEqual([400, "Virtual machine already running: vm1"]);
    const grow = await host.api("PATCH", "/svc/vms/vm1", { diskSize: "2GB" });
    expect([grow.status, grow.body.message]).toEqual([
      400,
      "Cannot modify vm1: the VM is running. Stop it first.",
    ]);
    const clone = await host.api("POST", "/svc/vms/clone", { name: "vm1", newName: "vm1-copy" });
    expect([clone.status, clone.body.message]).toEqual([400, "Virtual machine already running: vm1"]);

    const stop = await host.api("POST", "/svc/vms/vm1/stop", {});
    expect(stop.status).toBe(200);
    expect(stop.body).toEqual({ message: "VM stopped successfully", outcome: "quit" });
    expect(alive(s.pid)).toBe(false);
    expect(await get("vm1")).toMatchObject({ status: "stopped", vncUrl: null, ipAddress: null });
    const logs = (await host.api("GET", "/svc/logs?type=info")).body.info;
    expect(logs).toMatch(/VM started vm=vm1 pid=\d+ accelerator=(kvm|tcg) ipAddress=127\.\d+\.\d+\.\d+/);
    expect(logs).toMatch(/VM stopped vm=vm1/);
  });

  it("a VM whose QEMU is killed from outside is reported stopped", async () => {
    await runAndWait("vm1");
    const { pid } = session("vm1");
    process.kill(pid, "SIGKILL");
    const vm = await eventually(async () => {
      const v = await get("vm1");
      return v.status === "stopped" ? v : undefined;
    });
    expect(vm.vncUrl).toBeNull();
    expect((await host.api("POST", "/svc/vms/vm1/stop", {})).body.message).toBe(
      "Virtual machine not running: vm1",
    );
  });

  it("a restarted service finds running VMs again; two VMs get their own addresses and shares", async () => {
    const share = join(host.root, "shared");
    mkdirSync(share);
    const first = await runAndWait("vm1", { sharedDirectories: [{ hostPath: share, readOnly: true }] });
    const second = await runAndWait("vm2", { noDisplay: true });
    expect(first.sharedDirectories).toEqual([{ hostPath: share, tag: "hangar0", readOnly: true }]);
    expect(second.ipAddress).not.toBe(first.ipAddress);
    expect(second.vncUrl).toBeNull();
    const pid = session("vm1").pid;
    expect(readFileSync(`/proc/${pid}/cmdline`, "utf8")).toContain("mount_tag=hangar0");

    await host.restart();
    const found = await get("vm1");
    expect(found).toMatchObject({ status: "running", vncUrl: first.vncUrl, ipAddress: first.ipAddress });
    expect((await get("vm2")).status).toBe("running");
    expect((await host.api("GET", "/svc/host/status")).body.vm_count).toBe(2);

    expect((await host.api("POST", "/svc/vms/vm1/stop", {})).status).toBe(200);
    expect(alive(pid)).toBe(false);
    // Deleting a running VM stops it first.
    const pid2 = session("vm2").pid;
    expect((await host.api("DELETE", "/svc/vms/vm2")).status).toBe(200);
    expect(alive(pid2)).toBe(false);
  });

  it("a start failure reaches the log and the VM's status", async () => {
    expect((await host.api("POST", "/svc/vms", { name: "broken", ...LINUX_VM })).status).toBe(200);
    const disk = join(host.home, "broken", "disk.img");
    rmSync(disk);
    mkdirSync(disk); // QEMU cannot open a directory as a disk
    expect((await host.api("POST", "/svc/vms/broken/run", {})).status).toBe(202);
    const vm = await eventually(async () => {
      const v = await get("broken");
      return v.status === "stopped" && v.lastError ? v : undefined;
    });
    expect(vm.lastError).toMatch(/QEMU failed to start/);
    const errors = (await host.api("GET", "/svc/logs?type=error")).body.error;
    expect(errors).toMatch(/ERROR: VM failed to start vm=broken error=/);
  });
});
