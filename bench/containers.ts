/**
 * Container desktops and warm pools, against a real engine (podman's API service started here,
 * the project's image from scripts/test-image.sh's cache):
 *
 * - run → the computer server answers a screenshot (a new container each time);
 * - claim from a warm pool of 4 → a screenshot from the claimed desktop (released after);
 * - claim → its first screenshot (JPEG q80) from a pool of 2 ready for a second, and its second
 *   screenshot beside it (a warm member's first costs what any other does);
 * - 20 claims in a row from a pool of 4, each desktop kept (the refill must keep up): the slowest;
 * - an idle desktop's memory (its cgroup's, as the engine's stats say);
 * - 24 desktops (--many) started in groups of 8, fewer if the host's available memory falls below
 *   --reserve MB (2048): the time until all answer a screenshot, their memory, then a click each.
 *
 * Run: node --import tsx bench/containers.ts [--runs N] [--many N] [--reserve MB] [--only run,claim,first,row,many] [--log]
 * (`--only` runs those parts alone; `--log` prints each of the 20 claims and the pool's log lines:
 * each claim's store write and look at its desktop, each start's phases).
 */
import { readFileSync } from "node:fs";
import { desktopCommand } from "../test/host/desktop-client.js";
import { startPodman, TEST_IMAGE, testUlimits } from "../test/host/podman.js";
import { poolReady, startTestHost } from "../test/host/support.js";
import { cgroupMemory as containerMemory } from "./container-memory.js";
import { median, ms, p95, printTable, type Row } from "./lib.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const RUNS = arg("--runs", 10);
const MANY = arg("--many", 24);
/** The many-desktops part starts no more desktops once the host has less memory available (MB). */
const RESERVE_MB = arg("--reserve", 2048);
const ONLY = process.argv.includes("--only")
  ? process.argv[process.argv.indexOf("--only") + 1].split(",")
  : null;
const part = (name: string) => ONLY === null || ONLY.includes(name);
const LOG = process.argv.includes("--log");
const DESKTOP = {
  os: "linux",
  cpu: 1,
  memory: "1GB",
  diskSize: "4GB",
  display: "1280x800",
  runtime: "container",
};

const engine = await startPodman();
const MAX_STARTING = Number(process.argv[process.argv.indexOf("--max-starting") + 1]) || undefined;
const host = await startTestHost({
  containerEngine: engine.address,
  desktopImage: TEST_IMAGE,
  containerUlimits: testUlimits(),
  defaultRuntime: "container",
  pools: { maxStarting: MAX_STARTING },
});
const rows: Row[] = [];
class Skip extends Error {}
/** MemAvailable of /proc/meminfo, in MB. */
const memAvailableMb = () =>
  Math.round(Number(/MemAvailable:\s+(\d+)/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0) / 1024);
const mb = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(0)} MB`;

const cgroupMemory = (name: string) => containerMemory(engine.socket, name);

const waitPool = (name: string, ready: number) => poolReady(host, name, ready);

try {
  // 1. run → screenshot.
  const starts: number[] = [];
  for (let i = 0; part("run") && i < RUNS; i++) {
    const name = `bench-${i}`;
    await host.api("POST", "/svc/vms", { ...DESKTOP, name });
    const started = performance.now();
    await host.api("POST", `/svc/vms/${name}/run`, {});
    const vm = (await host.api("GET", `/svc/vms/${name}?wait=ready&timeout=60`)).body;
    const shot = await desktopCommand(vm, "screenshot");
    if (!shot.result.success) throw new Error(`no screenshot from ${name}`);
    starts.push(performance.now() - started);
    if (i === 0) {
      // 4. an idle desktop's memory, after it settled.
      await new Promise((r) => setTimeout(r, 30_000));
      const memory = await cgroupMemory(name);
      rows.push({
        name: "idle container desktop, memory (cgroup, 30 s after start)",
        median: mb(memory),
        p95: "",
        target: "≤ 120 MB",
      });
    }
    await host.api("DELETE", `/svc/vms/${name}`);
  }
  if (starts.length > 0) {
    rows.unshift({
      name: `run → screenshot answered (${RUNS} containers)`,
      median: ms(median(starts)),
      p95: ms(p95(starts)),
      target: "≤ 1.5 s median",
    });
  }

  if (part("claim") || part("row")) {
    await host.api("POST", "/svc/pools", { name: "bench", size: 4, display: "1280x800" });
    await waitPool("bench", 4);
  }
  // 2. claim → screenshot from a warm pool of 4.
  const claims: number[] = [];
  for (let i = 0; part("claim") && i < RUNS * 2; i++) {
    await waitPool("bench", 4);
    const started = performance.now();
    const desktop = (await host.api("POST", "/svc/pools/bench/claim", {})).body;
    const shot = await desktopCommand(desktop, "screenshot");
    claims.push(performance.now() - started);
    if (!shot.result.success) throw new Error("no screenshot from a claimed desktop");
    await host.api("POST", `/svc/vms/${desktop.name}/release`);
  }
  if (claims.length > 0) {
    rows.push({
      name: "claim from a warm pool of 4 → screenshot",
      median: ms(median(claims)),
      p95: ms(p95(claims)),
      target: "≤ 50 ms median, ≤ 150 ms p95",
    });
  }

  // 2b. claim → its first JPEG from a pool of 2 whose members have been ready for a second.
  if (part("first")) {
    await host.api("POST", "/svc/pools", { name: "pair", size: 2, display: "1280x800" });
    const firsts: number[] = [];
    const seconds: number[] = [];
    const claimsAlone: number[] = [];
    const jpeg = { format: "jpeg", quality: 80 };
    for (let i = 0; i < RUNS * 2; i++) {
      await waitPool("pair", 2);
      await new Promise((r) => setTimeout(r, 1000));
      const started = performance.now();
      const desktop = (await host.api("POST", "/svc/pools/pair/claim", {})).body;
      claimsAlone.push(performance.now() - started);
      const shot = await desktopCommand(desktop, "screenshot", jpeg);
      firsts.push(performance.now() - started);
      const again = performance.now();
      const next = await desktopCommand(desktop, "screenshot", jpeg);
      seconds.push(performance.now() - again);
      if (!shot.result.success || !next.result.success)
        throw new Error("no screenshot from a claimed desktop");
      await host.api("POST", `/svc/vms/${desktop.name}/release`);
    }
    rows.push({
      name: `claim → its first screenshot (JPEG q80), pool of 2 ready for 1 s (${firsts.length})`,
      median: ms(median(firsts)),
      p95: ms(p95(firsts)),
      target: "≤ 80 ms p95",
      note:
        `the claim alone: ${ms(median(claimsAlone))} median, ${ms(p95(claimsAlone))} p95; ` +
        `the claimed desktop's second JPEG: ${ms(median(seconds))} median, ${ms(p95(seconds))} p95`,
    });
    await host.api("DELETE", "/svc/pools/pair");
  }

  // 3. 20 claims in a row, each kept: the pool refills behind them.
  if (part("row")) {
    await waitPool("bench", 4);
    const row: number[] = [];
    for (let i = 0; i < 20; i++) {
      const started = performance.now();
      const desktop = (await host.api("POST", "/svc/pools/bench/claim", { timeout: 120 })).body;
      row.push(performance.now() - started);
      if (LOG) console.log(`claim ${i + 1}: ${ms(row[i])} ${desktop.name}`);
    }
    rows.push({
      name: "20 claims in a row from a pool of 4 (each kept)",
      median: ms(median(row)),
      p95: `${ms(p95(row))}, slowest ${ms(Math.max(...row))}`,
      target: "no claim over 1 s",
    });
    if (LOG) {
      const { info } = (await host.api("GET", "/svc/logs?type=info&lines=400")).body;
      for (const line of String(info).split("\n")) {
        if (/Pool desktop (claimed|ready)/.test(line)) console.log(line);
      }
    }
  }
  if (part("claim") || part("row")) await host.api("DELETE", "/svc/pools/bench");

  // 5. many desktops at once (--many 0 leaves it out).
  if (MANY === 0 || !part("many")) throw new Skip();
  // Started in groups of 8 until --many or the memory ceiling: no group starts once the host's
  // available memory is below --reserve MB.
  const started = performance.now();
  const names: string[] = [];
  let stoppedBy = "";
  while (names.length < MANY) {
    const available = memAvailableMb();
    if (available < RESERVE_MB) {
      stoppedBy = `, stopped by the memory ceiling (${available} MB available)`;
      break;
    }
    const group = Array.from(
      { length: Math.min(8, MANY - names.length) },
      (_, i) => `many-${names.length + i}`,
    );
    names.push(...group);
    await Promise.all(group.map((name) => host.api("POST", "/svc/vms", { ...DESKTOP, name })));
    await Promise.all(group.map((name) => host.api("POST", `/svc/vms/${name}/run`, {})));
    await Promise.all(group.map((name) => host.api("GET", `/svc/vms/${name}?wait=ready&timeout=600`)));
  }
  const vms = await Promise.all(names.map(async (name) => (await host.api("GET", `/svc/vms/${name}`)).body));
  const answered = await Promise.all(
    vms.map(async (vm) => {
      if (!vm.ready) {
        console.error(`${vm.name} did not answer: ${vm.message ?? vm.lastError}`);
        return false;
      }
      const shot = await desktopCommand(vm, "screenshot", {}, 120_000).catch((err: Error) => ({
        result: err,
      }));
      return shot.result.success === true;
    }),
  );
  const allMs = performance.now() - started;
  await new Promise((r) => setTimeout(r, 30_000));
  const memories = await Promise.all(names.map(cgroupMemory));
  const total = memories.reduce((a, b) => a + b, 0);
  // Then each answers a click where it was asked, and another screenshot.
  const clicked = await Promise.all(
    vms.map(async (vm, i) => {
      if (!vm.ready) return false;
      const at = { x: 100 + i, y: 200 };
      const click = await desktopCommand(vm, "left_click", at, 120_000).catch(() => undefined);
      const where = await desktopCommand(vm, "get_cursor_position", {}, 120_000).catch(() => undefined);
      const shot = await desktopCommand(vm, "screenshot", {}, 120_000).catch(() => undefined);
      return (
        click?.result.success === true &&
        where?.result.content?.position?.x === at.x &&
        shot?.result.success === true
      );
    }),
  );
  rows.push({
    name: `${names.length} desktops at once: all answer a screenshot`,
    median: `${answered.filter(Boolean).length}/${names.length} in ${(allMs / 1000).toFixed(1)} s${stoppedBy}`,
    p95: "",
    target: "all answer",
    note:
      `memory ${mb(total)} in all, ${mb(median(memories))} median each (30 s later); ` +
      `${clicked.filter(Boolean).length}/${names.length} then answer a click and a screenshot`,
  });
  await Promise.all(names.map((name) => host.api("DELETE", `/svc/vms/${name}`)));
} catch (err) {
  if (!(err instanceof Skip)) throw err;
} finally {
  printTable(
    `Container desktops and warm pools (podman ${await engine.podman("--version").then(
      (v) => v.trim().split(" ").pop(),
      () => "?",
    )})`,
    rows,
  );
  await host.cleanup();
  await engine.cleanup();
}
