/**
 * Snapshots of the full guest desktop (scripts/build-guest-image.sh: Debian with the virtual desktop
 * and the computer server, 2 GB of RAM, TCG here), through the host service's API, as issue 32's
 * targets are set:
 *
 * - cold boot: run → the computer server answers a screenshot;
 * - the guest's computer server (the systemd unit's process) RSS, read inside the guest from
 *   /proc/<pid>/status by another process: idle, right after bench/burst.ts's load, 60 s later;
 * - restore of a running snapshot (Mousepad open) → a screenshot from its computer server, N times;
 * - fork of F desktops from it → all F answer a screenshot; the sum of their QEMUs' PSS against
 *   F × their RAM.
 *
 * Run: HANGAR_GUEST_IMAGE=disk.img node --import tsx bench/guest-snapshots.ts [--runs 10] [--forks 8]
 * (without HANGAR_GUEST_IMAGE the image of this checkout is built first: test/e2e/guest-image.ts).
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ensureGuestImage } from "../test/e2e/guest-image.js";
import { postCmd } from "../test/support/server.js";
import { burst, type Call } from "./burst.js";
import { startGuestHost } from "./guest-host.js";
import { machineLoad, median, p95, printTable, type Row } from "./lib.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const RUNS = arg("--runs", 10);
const FORKS = arg("--forks", 8);
const VM = "bench-guest";
const RAM_MB = 2048;

/** A screenshot from a desktop's computer server; throws when it does not answer one. */
async function screenshot(url: string) {
  const shot = await postCmd(url, { command: "screenshot", params: { format: "png" } });
  if (!shot.event?.success) throw new Error(`no screenshot from ${url}: ${JSON.stringify(shot.event)}`);
}

/** VmRSS in MB of the guest's computer server, the main process of its systemd unit. */
async function guestServerRssMb(url: string): Promise<number> {
  const read = await postCmd(url, {
    command: "run_command",
    params: {
      command: "grep VmRSS /proc/$(systemctl show -p MainPID --value hangar-computer.service)/status",
    },
  });
  const kb = Number(/(\d+)\s*kB/.exec(String(read.event?.stdout))?.[1]);
  if (!kb) throw new Error(`no VmRSS of the guest's server: ${JSON.stringify(read.event)}`);
  return kb / 1024;
}

/** The guest's server memory through the same burst as bench/memory.ts. */
async function guestServerMemory(url: string): Promise<Row> {
  const call: Call = async (command, params = {}) => {
    const reply = await postCmd(url, { command, params });
    if (!reply.event?.success)
      throw new Error(`${command} failed in the guest: ${JSON.stringify(reply.event)}`);
  };
  const idle = await guestServerRssMb(url);
  await burst(call, "/tmp/hangar-bench-burst.bin");
  const after = await guestServerRssMb(url);
  await sleep(60_000);
  const later = await guestServerRssMb(url);
  await call("run_command", { command: "rm -f /tmp/hangar-bench-burst.bin" });
  return {
    name: "full desktop: its computer server's RSS (systemd unit), idle / right after a burst / 60 s later",
    median: `${idle.toFixed(1)} / ${after.toFixed(1)} / ${later.toFixed(1)} MB`,
    p95: "",
    target: "≤ 60 / — / ≤ 80 MB",
  };
}

/** The sum of the proportional set sizes of the QEMU processes whose command line names `dir`. */
function qemuPssMb(dir: string): number {
  let kb = 0;
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (!cmdline.startsWith("qemu-system") || !cmdline.includes(dir)) continue;
      kb += Number(/^Pss:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"))?.[1] ?? 0);
    } catch {
      // gone meanwhile
    }
  }
  return kb / 1024;
}

const image = await ensureGuestImage();
const guests = await startGuestHost("hangar-bench-guest-");
const { dir, svc } = guests;
const rows: Row[] = [];
try {
  await guests.createDesktop(VM, image);

  let started = performance.now();
  await svc("POST", `/svc/vms/${VM}/run`, {});
  const ready = await svc("GET", `/svc/vms/${VM}?wait=ready&timeout=900`);
  await screenshot(ready.computerServerUrl);
  rows.push({
    name: "full desktop, cold boot (TCG): run → a screenshot",
    median: `${((performance.now() - started) / 1000).toFixed(1)} s`,
    p95: "",
    target: "report",
  });
  rows.push(await guestServerMemory(ready.computerServerUrl));

  await postCmd(ready.computerServerUrl, { command: "launch", params: { app: "mousepad" } });
  for (let i = 0; i < 120; i++) {
    const title = await postCmd(ready.computerServerUrl, { command: "get_active_window_title", params: {} });
    if (/Mousepad/.test(String(title.event?.title))) break;
    await sleep(500);
  }
  started = performance.now();
  await svc("POST", `/svc/vms/${VM}/snapshots`, { name: "app" });
  rows.push({
    name: "snapshot of the running desktop (2 GB RAM)",
    median: `${((performance.now() - started) / 1000).toFixed(2)} s`,
    p95: "",
    target: "",
  });

  const restores: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    started = performance.now();
    const restored = await svc("POST", `/svc/vms/${VM}/restore?wait=ready&timeout=300`, { snapshot: "app" });
    await screenshot(restored.computerServerUrl);
    restores.push(performance.now() - started);
  }
  rows.push({
    name: `restore → a screenshot from its computer server (${RUNS} runs)`,
    median: `${(median(restores) / 1000).toFixed(2)} s`,
    p95: `${(p95(restores) / 1000).toFixed(2)} s`,
    target: "≤ 1 s median",
  });

  // Where the fork's time goes: the call (QEMUs launched one at a time, each loading the
  // snapshot's state), then each fork's first /status, then its first screenshot.
  started = performance.now();
  const forked = await svc("POST", `/svc/vms/${VM}/fork`, {
    snapshot: "app",
    count: FORKS,
    prefix: "bench-fork",
  });
  const called = performance.now() - started;
  const names: string[] = forked.forks.map((fork: { name: string }) => fork.name);
  const phases = await Promise.all(
    names.map(async (name) => {
      const up = await svc("GET", `/svc/vms/${name}?wait=ready&timeout=900`);
      const answered = performance.now() - started;
      await screenshot(up.computerServerUrl);
      return { answered, shot: performance.now() - started };
    }),
  );
  // The host's own account of each fork's start (its log: waiting for the launches before it,
  // QEMU's launch, loading the state).
  const logFile = readdirSync(dir, { recursive: true, encoding: "utf8" }).find((f) => f.endsWith("info.log"));
  if (logFile) {
    const lines = readFileSync(join(dir, logFile), "utf8").split("\n");
    for (const line of lines.filter((l) => /started from a snapshot|VM forked/.test(l)).slice(-FORKS - 1))
      process.stderr.write(`${line}\n`);
  }
  const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
  const answered = sorted(phases.map((p) => p.answered));
  const shots = sorted(phases.map((p) => p.shot));
  const s1 = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  rows.push({
    name: `fork of ${FORKS} → all ${FORKS} answer a screenshot`,
    median: s1(shots[shots.length - 1] ?? 0),
    p95: "",
    target: "≤ 8 s",
    note:
      `the call (launched, states loaded) ${s1(called)}; ready (first, median, last) ` +
      `${s1(answered[0] ?? 0)}, ${s1(median(answered))}, ${s1(answered[answered.length - 1] ?? 0)}; ` +
      `screenshots ${s1(shots[0] ?? 0)}, ${s1(median(shots))}`,
  });
  // Idle a moment: the PSS of desktops at rest, not mid-start.
  await sleep(5000);
  const pss = qemuPssMb(join(dir, "vms", "bench-fork"));
  rows.push({
    name: `host memory of the ${FORKS} forked idle desktops (sum of their QEMUs' PSS)`,
    median: `${pss.toFixed(0)} MB`,
    p95: "",
    target: "≤ 50 % of 8 × their RAM",
    note: `${((pss / (FORKS * RAM_MB)) * 100).toFixed(0)} % of ${FORKS} × ${RAM_MB} MB`,
  });
} finally {
  await guests.close();
}
printTable(`Snapshots of the full guest desktop (${machineLoad()})`, rows);
