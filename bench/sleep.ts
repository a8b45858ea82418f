/**
 * Desktops that sleep and wake (docs/host.md#hibernate-and-resume), through the host service's API:
 *
 * - QEMU, the tiny guest (scripts/tiny-guest.sh): hibernate (the RAM file copied out of /dev/shm,
 *   QEMU ends: its RSS before and after), resume → the guest answers; the first cycle after a boot
 *   (RAM a file of its own, mapped privately on resume) and the later ones (the resumed VM's RAM
 *   goes in the migration stream, then into a RAM file of its own, mapped privately on resume);
 * - the first request to a sleeping VM's address (wake on request) → answered;
 * - a claim from a pool filled from a memory snapshot (members are forks, not boots);
 * - containers of the project's image (podman, test/host/podman.ts): `paused` and `disk`,
 *   hibernate → resume → a screenshot answered, and the first /cmd to a paused desktop.
 *
 * Run: node --import tsx bench/sleep.ts [--runs 8] [--memory 256MB] [--no-containers]
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { desktopCommand } from "../test/host/desktop-client.js";
import { startPodman, TEST_IMAGE, testUlimits } from "../test/host/podman.js";
import { LINUX_VM, startTestHost, type TestHost } from "../test/host/support.js";
import { bootTinyGuest, guest, TINY_VM, tinyGuest } from "../test/host/tiny-guest.js";
import { machineLoad, median, ms, p95, printTable, type Row } from "./lib.js";

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? (process.argv[i + 1] ?? fallback) : fallback;
};
const RUNS = Number(arg("--runs", "8"));
const MEMORY = arg("--memory", "256MB");
const CONTAINERS = !process.argv.includes("--no-containers");
const rows: Row[] = [];
const row = (name: string, samples: number[], target = "", note = "") =>
  rows.push({ name, median: ms(median(samples)), p95: ms(p95(samples)), target, note });

async function api(host: TestHost, method: string, path: string, body?: unknown) {
  const res = await host.api(method, path, body);
  if (res.status !== 200 && res.status !== 202 && res.status !== 201) {
    throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  }
  return res.body;
}

/** Resident kilobytes of this run's QEMUs (0 when none lives). */
async function qemuRssKb(root: string): Promise<number> {
  let total = 0;
  for (const pid of await readdir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (!cmdline.includes("process=hangar-vm") || !cmdline.includes(root)) continue;
    const status = await readFile(`/proc/${pid}/status`, "utf8").catch(() => "");
    total += Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  }
  return total;
}

async function qemu() {
  const host = await startTestHost({ pools: { checkIntervalMs: 1000 } });
  try {
    await api(host, "POST", "/svc/vms", { name: "tiny", ...TINY_VM, memory: MEMORY });
    bootTinyGuest(join(host.home, "tiny"), tinyGuest());
    await api(host, "POST", "/svc/vms/tiny/run", {});
    const url = (await api(host, "GET", "/svc/vms/tiny?wait=ready&timeout=600")).computerServerUrl as string;
    await guest(url, "/inc");

    const cycle = async (sleeps: number[], wakes: number[], notes: string[]) => {
      const rss = await qemuRssKb(host.root);
      let started = performance.now();
      const slept = await api(host, "POST", "/svc/vms/tiny/hibernate", {});
      sleeps.push(performance.now() - started);
      notes.push(
        `RSS ${Math.round(rss / 1024)} MB → ${Math.round((await qemuRssKb(host.root)) / 1024)} MB, ${Math.round(slept.hibernationBytes / 1024 ** 2)} MB on disk`,
      );
      started = performance.now();
      await api(host, "POST", "/svc/vms/tiny/resume", {});
      await guest(url, "/status");
      wakes.push(performance.now() - started);
    };
    const first = { sleeps: [] as number[], wakes: [] as number[], notes: [] as string[] };
    const later = { sleeps: [] as number[], wakes: [] as number[], notes: [] as string[] };
    for (let i = 0; i < RUNS; i++) {
      // A fresh boot's RAM is a file of its own: restart it for each first-cycle sample.
      if (i > 0) {
        await api(host, "POST", "/svc/vms/tiny/stop", { force: true });
        await api(host, "POST", "/svc/vms/tiny/run", {});
        await api(host, "GET", "/svc/vms/tiny?wait=ready&timeout=600");
      }
      await cycle(first.sleeps, first.wakes, first.notes);
      await cycle(later.sleeps, later.wakes, later.notes);
    }
    row(`QEMU ${MEMORY}: hibernate (RAM file copied, QEMU ends)`, first.sleeps, "", first.notes[0]);
    row(`QEMU ${MEMORY}: resume → the guest answers (RAM file mapped)`, first.wakes, "≤ 1.5 s");
    row(`QEMU ${MEMORY}: hibernate a resumed VM (RAM: stream → file)`, later.sleeps, "", later.notes[0]);
    row(`QEMU ${MEMORY}: resume of it → answers (RAM file mapped)`, later.wakes, "≤ 1.5 s");

    const woken: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      await api(host, "POST", "/svc/vms/tiny/hibernate", {});
      const started = performance.now();
      const res = await fetch(new URL("/status", url), { signal: AbortSignal.timeout(120_000) });
      await res.text();
      if (res.headers.get("x-hangar-woke") !== "1") throw new Error("the request did not wake it");
      woken.push(performance.now() - started);
    }
    row("QEMU: first request to a sleeping VM's address → answered", woken, "≤ resume + 0.2 s");

    await api(host, "POST", "/svc/vms/tiny/snapshots", { name: "warm" });
    await api(host, "POST", "/svc/pools", { name: "warm", template: "tiny", fromSnapshot: "warm", size: 2 });
    const claims: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      for (;;) {
        if ((await api(host, "GET", "/svc/pools/warm")).ready >= 2) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      const started = performance.now();
      const claimed = await api(host, "POST", "/svc/pools/warm/claim", { wait: false });
      claims.push(performance.now() - started);
      await api(host, "POST", `/svc/vms/${claimed.name}/release`);
    }
    row("claim from a pool filled from a memory snapshot (QEMU)", claims, "≤ 100 ms");
    await api(host, "DELETE", "/svc/pools/warm");
  } finally {
    await host.cleanup();
  }
}

async function containers() {
  const engine = await startPodman();
  const host = await startTestHost({
    containerEngine: engine.address,
    desktopImage: TEST_IMAGE,
    containerUlimits: testUlimits(),
    defaultRuntime: "container",
  });
  try {
    await api(host, "POST", "/svc/vms", { name: "nap", ...LINUX_VM });
    await api(host, "POST", "/svc/vms/nap/run", {});
    const desktop = await api(host, "GET", "/svc/vms/nap?wait=ready&timeout=120");
    const shot = async () => {
      const out = await desktopCommand(desktop, "screenshot", { format: "png" }, 120_000);
      if (!out.result.success) throw new Error(JSON.stringify(out.result));
    };
    await shot();
    for (const mode of ["paused", "disk"] as const) {
      const sleeps: number[] = [];
      const wakes: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        let started = performance.now();
        await api(host, "POST", "/svc/vms/nap/hibernate", { mode });
        sleeps.push(performance.now() - started);
        started = performance.now();
        await api(host, "POST", "/svc/vms/nap/resume?wait=ready&timeout=120", {});
        await shot();
        wakes.push(performance.now() - started);
      }
      row(`container (${mode}): hibernate`, sleeps);
      row(
        `container (${mode}): resume → screenshot answered`,
        wakes,
        mode === "paused" ? "≤ 1.5 s" : "the disk-only figure",
      );
    }
    const woken: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      await api(host, "POST", "/svc/vms/nap/hibernate", {});
      const started = performance.now();
      await shot();
      woken.push(performance.now() - started);
    }
    row("container (paused): first /cmd to it → answered", woken, "≤ resume + 0.2 s");
  } finally {
    await host.cleanup().finally(() => engine.cleanup());
  }
}

try {
  await qemu();
  if (CONTAINERS) await containers();
} finally {
  printTable(`Hibernate and resume (${machineLoad()})`, rows);
}
