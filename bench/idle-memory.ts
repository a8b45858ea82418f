/**
 * Idle desktops that give their memory back (issue 43's density target): N container desktops of
 * the project's image (default 24, podman) run and answer a screenshot; once left alone for a
 * while, the memory their cgroups hold awake; then each gets `idleTimeout: 2s` with `idleMode:
 * "disk"`, and the host service's auto-pause puts them all to sleep: the time until the last is
 * asleep, the memory they hold then, and the host's available memory before and after. Last, a
 * command to a few of them: the first /cmd to an idle-stopped desktop → answered (it starts again).
 *
 * The desktops run the image with this checkout's `dist/` laid over it (as test/host/idle.test.ts),
 * so that their computer server is the one that answers `GET /activity/idle` here.
 *
 * Run: node --import tsx bench/idle-memory.ts [--many 24] [--settle 20]
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { desktopCommand } from "../test/host/desktop-client.js";
import { startPodman, TEST_IMAGE, testUlimits } from "../test/host/podman.js";
import { LINUX_VM, startTestHost } from "../test/host/support.js";
import { cgroupMemory } from "./container-memory.js";
import { machineLoad, median, ms, p95, printTable, type Row } from "./lib.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const MANY = arg("--many", 24);
const SETTLE_S = arg("--settle", 20);
const WOKEN = Math.min(4, MANY);
const IMAGE = "localhost/hangar:idle-bench";
const mb = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(0)} MB`;
const available = () =>
  Number(/MemAvailable:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0) * 1024;

const rows: Row[] = [];
const startLoad = machineLoad();
const engine = await startPodman();
const context = mkdtempSync(join(tmpdir(), "hangar-idle-bench-"));
try {
  cpSync(join(import.meta.dirname, "../dist"), join(context, "dist"), { recursive: true });
  writeFileSync(join(context, "Containerfile"), `FROM ${TEST_IMAGE}\nCOPY dist /opt/hangar/dist\n`);
  await engine.podman("build", "--pull=never", "-t", IMAGE, "-f", join(context, "Containerfile"), context);
  const host = await startTestHost({
    containerEngine: engine.address,
    desktopImage: IMAGE,
    containerUlimits: testUlimits(),
    defaultRuntime: "container",
  });
  try {
    const names = Array.from({ length: MANY }, (_, i) => `idle-${i}`);
    const before = available();
    for (const name of names) {
      const made = await host.api("POST", "/svc/vms", { ...LINUX_VM, name });
      if (made.status !== 200) throw new Error(`create ${name}: ${made.text}`);
    }
    await Promise.all(names.map((name) => host.api("POST", `/svc/vms/${name}/run`, {})));
    for (const name of names) {
      const vm = (await host.api("GET", `/svc/vms/${name}?wait=ready&timeout=600`)).body;
      const shot = await desktopCommand(vm, "screenshot", {}, 120_000);
      if (!shot.result.success) throw new Error(`${name}: no screenshot`);
    }
    // Left alone: what an idle desktop holds once its start's work is done.
    await sleep(SETTLE_S * 1000);
    const awake = (await Promise.all(names.map((n) => cgroupMemory(engine.socket, n)))).reduce(
      (a, b) => a + b,
    );
    const awakeAvailable = available();
    rows.push({
      name: `${MANY} idle container desktops, awake: memory of their cgroups (sum)`,
      median: mb(awake),
      p95: "",
      target: "",
      note: `${mb(awake / MANY)} each; the host's available memory ${mb(before - awakeAvailable)} lower than before they ran`,
    });

    const paused = performance.now();
    for (const name of names) {
      const res = await host.api("PATCH", `/svc/vms/${name}`, { idleTimeout: "2s", idleMode: "disk" });
      if (res.status !== 200) throw new Error(`PATCH ${name}: ${res.text}`);
    }
    for (;;) {
      const list = (await host.api("GET", "/svc/vms")).body as { name: string; status: string }[];
      const asleep = list.filter((vm) => names.includes(vm.name) && vm.status === "hibernated").length;
      if (asleep === MANY) break;
      if (performance.now() - paused > 600_000)
        throw new Error(`only ${asleep} of ${MANY} asleep after 10 min`);
      await sleep(250);
    }
    const allAsleepMs = performance.now() - paused;
    const asleep = (await Promise.all(names.map((n) => cgroupMemory(engine.socket, n)))).reduce(
      (a, b) => a + b,
    );
    const asleepAvailable = available();
    rows.push({
      name: `the same, auto-paused (idleTimeout 2s, idleMode disk): memory of their cgroups`,
      median: mb(asleep),
      p95: "",
      target: `≤ 10 % of awake (${mb(awake / 10)})`,
      note: `${((asleep / awake) * 100).toFixed(1)} % of awake; the host's available memory ${mb(asleepAvailable - awakeAvailable)} higher`,
    });
    rows.push({
      name: `timeouts set → all ${MANY} asleep (the watcher looks every 0.5 s)`,
      median: ms(allAsleepMs),
      p95: "",
      target: "",
    });

    const wakes: number[] = [];
    for (const name of names.slice(0, WOKEN)) {
      await host.api("PATCH", `/svc/vms/${name}`, { idleTimeout: "off" });
      const vm = (await host.api("GET", `/svc/vms/${name}`)).body;
      const started = performance.now();
      const out = await desktopCommand(vm, "get_screen_size", {}, 120_000);
      if (!out.result.success) throw new Error(`${name}: the command to wake it failed`);
      wakes.push(performance.now() - started);
    }
    rows.push({
      name: `first /cmd to an idle-stopped desktop → answered (${WOKEN} of them)`,
      median: ms(median(wakes)),
      p95: ms(p95(wakes)),
      target: "the disk-only figure",
    });
    await Promise.all(names.map((name) => host.api("DELETE", `/svc/vms/${name}`)));
  } finally {
    await host.cleanup();
  }
} finally {
  rmSync(context, { recursive: true, force: true });
  await engine.cleanup();
  printTable(
    `Idle desktops that give their memory back (${startLoad} at the start; ${machineLoad()} at the end)`,
    rows,
  );
}
