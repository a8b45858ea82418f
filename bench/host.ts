/**
 * The host service's figures, over real HTTP with real QEMU: create a 64 GB VM, clone a 64 GB VM
 * with 1 GB written, list 100 VMs (2 of them running), get a running VM, run → QEMU up and QMP
 * answering.
 * Run: node --import tsx bench/host.ts
 */
import { execFileSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { QmpClient } from "../src/host/qemu/qmp.js";
import { fillSparse, LINUX_VM, startTestHost } from "../test/host/support.js";
import { printTable, type Row, summarize, timeIt } from "./lib.js";

const host = await startTestHost({ stopGraceMs: 200 });
const rows: Row[] = [];
let counter = 0;

async function ok(method: string, path: string, body?: unknown) {
  const res = await host.api(method, path, body);
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  return res.body;
}

async function manual(name: string, runs: number, fn: () => Promise<number>, target: string, note?: string) {
  const samples: number[] = [];
  for (let i = 0; i < runs; i++) samples.push(await fn());
  rows.push({ name, ...summarize(samples), target, note });
}

try {
  rows.push(
    await timeIt(
      "create a 64 GB VM",
      () => ok("POST", "/svc/vms", { ...LINUX_VM, name: `new-${counter++}`, diskSize: "64GB" }),
      { runs: 30, warmup: 3, target: "≤ 200 ms" },
    ),
  );

  await ok("POST", "/svc/vms", { ...LINUX_VM, name: "source", diskSize: "64GB" });
  await fillSparse(join(host.home, "source", "disk.img"), 64 * 1024 ** 3, 16);
  await manual(
    "clone 64 GB, 1 GB allocated",
    5,
    async () => {
      const name = `copy-${counter++}`;
      const start = performance.now();
      await ok("POST", "/svc/vms/clone", { name: "source", newName: name });
      const elapsed = performance.now() - start;
      await ok("DELETE", `/svc/vms/${name}`);
      return elapsed;
    },
    "≤ 3 s",
    "sparse copy of the data extents (no reflink on ext4)",
  );
  // The same copy by cp alone, for reference: what the disk allows at this moment.
  await manual(
    "reference: cp of the same disk",
    3,
    async () => {
      const target = join(host.root, "reference.img");
      const start = performance.now();
      execFileSync("cp", [
        "--reflink=auto",
        "--sparse=always",
        join(host.home, "source", "disk.img"),
        target,
      ]);
      const elapsed = performance.now() - start;
      rmSync(target);
      return elapsed;
    },
    "",
    "disk-bound: the clone adds little to it",
  );

  const hundred = join(host.root, "hundred");
  await ok("POST", "/svc/config/locations", { name: "hundred", path: hundred });
  for (let i = 0; i < 100; i++)
    await ok("POST", "/svc/vms", { ...LINUX_VM, name: `vm-${i}`, storage: "hundred" });
  rows.push(
    await timeIt(
      "list 100 VMs",
      async () => {
        const list = await ok("GET", "/svc/vms?storage=hundred");
        if (list.length !== 100) throw new Error(`listed ${list.length}`);
      },
      { runs: 30, warmup: 3, target: "≤ 100 ms" },
    ),
  );
  // Reads answer from files and the cached SSH probe, never from the guests.
  for (const name of ["vm-0", "vm-1"]) await ok("POST", `/svc/vms/${name}/run`, { storage: "hundred" });
  for (const name of ["vm-0", "vm-1"]) {
    while ((await ok("GET", `/svc/vms/${name}?storage=hundred`)).vncUrl === null) {
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  rows.push(
    await timeIt(
      "list 100 VMs, 2 running",
      async () => {
        const list = await ok("GET", "/svc/vms?storage=hundred");
        if (list.filter((vm: { status: string }) => vm.status === "running").length !== 2) {
          throw new Error("expected 2 running VMs");
        }
      },
      { runs: 50, warmup: 5, target: "≤ 50 ms" },
    ),
  );
  rows.push(
    await timeIt(
      "get a running VM",
      async () => {
        if ((await ok("GET", "/svc/vms/vm-0?storage=hundred")).status !== "running")
          throw new Error("not running");
      },
      { runs: 100, warmup: 10, target: "≤ 10 ms" },
    ),
  );
  for (const name of ["vm-0", "vm-1"]) await ok("POST", `/svc/vms/${name}/stop`, { storage: "hundred" });

  await ok("POST", "/svc/vms", { ...LINUX_VM, name: "runner" });
  let accelerator = "";
  const runOnce = async () => {
    const start = performance.now();
    await ok("POST", "/svc/vms/runner/run", {});
    for (;;) {
      const vm = await ok("GET", "/svc/vms/runner");
      if (vm.vncUrl) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const session = JSON.parse(readFileSync(join(host.home, "runner", "session.json"), "utf8"));
    accelerator = session.accelerator;
    const qmp = await QmpClient.connect(session.qmpSocket);
    await qmp.execute("query-status");
    qmp.close();
    const elapsed = performance.now() - start;
    await ok("POST", "/svc/vms/runner/stop", {});
    return elapsed;
  };
  await runOnce(); // the first run also waits for the one-time KVM probe
  await manual("run → QEMU up, QMP answering", 5, runOnce, "≤ 2 s", `accelerator ${accelerator}`);
} finally {
  await host.cleanup();
}
printTable("Host service (bench/host.ts)", rows);
