/**
 * Snapshots, restore and fork of QEMU VMs on the tiny guest (scripts/tiny-guest.sh: a kernel and a
 * busybox initramfs answering HTTP with a counter in RAM), through the host service's API:
 *
 * - cold boot: run → the guest answers `/status`;
 * - snapshot of the running VM (pause, device state, RAM file copy, disk copy, resume);
 * - restore → the guest answers, with the snapshot's RAM as a template file mapped privately;
 * - the same from a snapshot whose RAM is in the migration stream (what QEMU's migration to a file
 *   gives: a snapshot of a restored VM, whose RAM is not a file of its own, is taken so);
 * - fork of 8 → all 8 answer; the sum of their QEMUs' PSS against 8 × their RAM;
 * - N reset cycles (restore → /status → /inc): the service's descriptors, QEMU processes and the
 *   disk the VM's directory takes, before and after.
 *
 * Run: node --import tsx bench/snapshots.ts [--runs 10] [--forks 8] [--cycles 100] [--memory 256MB]
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { startTestHost } from "../test/host/support.js";
import { bootTinyGuest, guest, TINY_VM, tinyGuest } from "../test/host/tiny-guest.js";
import { machineLoad, median, ms, p95, printTable, type Row } from "./lib.js";

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
};
const RUNS = Number(arg("--runs", "10"));
const FORKS = Number(arg("--forks", "8"));
const CYCLES = Number(arg("--cycles", "100"));
const MEMORY = arg("--memory", "256MB");

const host = await startTestHost();
const rows: Row[] = [];
const secs = (x: number) => `${(x / 1000).toFixed(2)} s`;
const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;

async function api(method: string, path: string, body?: unknown) {
  const res = await host.api(method, path, body);
  if (res.status !== 200 && res.status !== 202)
    throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  return res.body;
}

/** The QEMU processes of this run: pid → VM name. */
async function qemus(): Promise<Map<number, string>> {
  const found = new Map<number, string>();
  for (const pid of await readdir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (cmdline.includes("process=hangar-vm") && cmdline.includes(host.root)) {
      found.set(Number(pid), /-name\0([^,\0]+)/.exec(cmdline)?.[1] ?? "?");
    }
  }
  return found;
}

const pssKb = (pid: number) =>
  Number(/^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))?.[1] ?? 0);
const diskKb = (dir: string) => Number(execFileSync("du", ["-sk", dir], { encoding: "utf8" }).split("\t")[0]);

/** Restore → the guest's first answer; the part of it the API call took goes to `apiTimes`. */
async function restoreToAnswer(snapshot: string, apiTimes: number[] = []): Promise<number> {
  const started = performance.now();
  const vm = await api("POST", "/svc/vms/tiny/restore", { snapshot });
  apiTimes.push(performance.now() - started);
  await guest(vm.computerServerUrl, "/status");
  return performance.now() - started;
}

try {
  const guestDir = tinyGuest();
  await api("POST", "/svc/vms", { name: "tiny", ...TINY_VM, memory: MEMORY });
  bootTinyGuest(join(host.home, "tiny"), guestDir);
  const bootStart = performance.now();
  await api("POST", "/svc/vms/tiny/run", {});
  const booted = await api("GET", "/svc/vms/tiny?wait=ready&timeout=600");
  await guest(booted.computerServerUrl, "/status");
  rows.push({
    name: `cold boot (TCG, ${MEMORY}): run → guest answers`,
    median: secs(performance.now() - bootStart),
    p95: "",
  });
  for (let i = 0; i < 5; i++) await guest(booted.computerServerUrl, "/inc");

  const snapStart = performance.now();
  const snap = await api("POST", "/svc/vms/tiny/snapshots", { name: "base" });
  rows.push({
    name: "snapshot of the running VM (RAM as a file)",
    median: ms(performance.now() - snapStart),
    p95: "",
    note: `${(snap.bytes / 1024 ** 2).toFixed(0)} MB on disk`,
  });

  await restoreToAnswer("base"); // warm the page cache and QEMU's binary
  const restores: number[] = [];
  const restoreCalls: number[] = [];
  for (let i = 0; i < RUNS; i++) restores.push(await restoreToAnswer("base", restoreCalls));
  rows.push({
    name: "restore call alone (QEMU quit, overlay, launch, state loaded, running)",
    median: ms(median(restoreCalls)),
    p95: ms(p95(restoreCalls)),
  });
  rows.push({
    name: "restore → guest answers (RAM file mapped privately)",
    median: ms(median(restores)),
    p95: ms(p95(restores)),
    target: "≤ 1 s median (full desktop)",
  });

  // The VM now runs restored (its RAM a private mapping): a snapshot of it carries the RAM in the stream.
  const eagerStart = performance.now();
  const eager = await api("POST", "/svc/vms/tiny/snapshots", { name: "stream" });
  rows.push({
    name: "snapshot with the RAM in the migration stream",
    median: ms(performance.now() - eagerStart),
    p95: "",
    note: `${(eager.bytes / 1024 ** 2).toFixed(0)} MB on disk`,
  });
  await restoreToAnswer("stream");
  const eagerRestores: number[] = [];
  const eagerCalls: number[] = [];
  for (let i = 0; i < RUNS; i++) eagerRestores.push(await restoreToAnswer("stream", eagerCalls));
  rows.push({
    name: "restore call alone, RAM from the migration stream",
    median: ms(median(eagerCalls)),
    p95: ms(p95(eagerCalls)),
  });
  rows.push({
    name: "restore → guest answers (RAM read from the migration stream)",
    median: ms(median(eagerRestores)),
    p95: ms(p95(eagerRestores)),
  });

  const names = Array.from({ length: FORKS }, (_, i) => `fork-${i + 1}`);
  const forkStart = performance.now();
  const forked = await api("POST", "/svc/vms/tiny/fork?wait=ready&timeout=300", { snapshot: "base", names });
  await Promise.all(
    forked.forks.map((f: { computerServerUrl: string }) => guest(f.computerServerUrl, "/status")),
  );
  rows.push({
    name: `fork of ${FORKS} → all answer`,
    median: secs(performance.now() - forkStart),
    p95: "",
    target: "≤ 8 s (full desktop)",
  });
  const processes = await qemus();
  const forkPids = [...processes].filter(([, name]) => name.startsWith("fork-")).map(([pid]) => pid);
  const pss = forkPids.reduce((sum, pid) => sum + pssKb(pid), 0);
  const ramKb = (Number.parseInt(MEMORY, 10) * 1024 * FORKS) as number;
  rows.push({
    name: `PSS of ${FORKS} forked idle guests (sum)`,
    median: mb(pss),
    p95: "",
    target: "≤ 50 % of 8 × RAM",
    note: `${((pss / ramKb) * 100).toFixed(0)} % of ${FORKS} × ${MEMORY}`,
  });
  for (const name of names) await api("DELETE", `/svc/vms/${name}`);

  const fds = () => readdirSync("/proc/self/fd").length;
  const before = { fds: fds(), qemus: (await qemus()).size, disk: diskKb(join(host.home, "tiny")) };
  const cycles: number[] = [];
  for (let i = 0; i < CYCLES; i++) {
    const started = performance.now();
    const vm = await api("POST", "/svc/vms/tiny/restore", { snapshot: "base" });
    await guest(vm.computerServerUrl, "/status");
    await guest(vm.computerServerUrl, "/inc");
    cycles.push(performance.now() - started);
  }
  const after = { fds: fds(), qemus: (await qemus()).size, disk: diskKb(join(host.home, "tiny")) };
  rows.push({
    name: `${CYCLES} reset cycles (restore → status → inc), each`,
    median: ms(median(cycles)),
    p95: ms(p95(cycles)),
    target: "no growth",
    note: `descriptors ${before.fds} → ${after.fds}, QEMUs ${before.qemus} → ${after.qemus}, VM disk ${mb(before.disk)} → ${mb(after.disk)}`,
  });
} finally {
  printTable(`Snapshots on the tiny guest (${machineLoad()})`, rows);
  await host.cleanup();
}
