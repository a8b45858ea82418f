/**
 * What an idle full guest desktop costs (scripts/build-guest-image.sh, 2 GB, 2 vCPUs, TCG here), as
 * the forks of a snapshot pay it: a booted desktop with Mousepad open is left alone for a minute,
 * then for `--window` seconds its QEMU's CPU time is read on the host (/proc), and inside the guest
 * every thread's (utime + stime from /proc/<pid>/task/<tid>/stat, read twice by one `cat` so that
 * the reading adds almost nothing). Prints the host's figure and the threads that took the most.
 *
 * Run: HANGAR_GUEST_IMAGE=disk.img node --import tsx bench/guest-idle.ts [--window 30] [--settle 60]
 * (without HANGAR_GUEST_IMAGE the image of this checkout is built first: test/e2e/guest-image.ts).
 */
import { readdirSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { ensureGuestImage } from "../test/e2e/guest-image.js";
import { postCmd } from "../test/support/server.js";
import { startGuestHost } from "./guest-host.js";
import { machineLoad } from "./lib.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const WINDOW_S = arg("--window", 30);
const SETTLE_S = arg("--settle", 60);
const VM = "bench-idle";
/** Clock ticks a second in the guest's /proc (USER_HZ). */
const TICKS = 100;

/** Every thread's CPU ticks inside the guest over the window, most first: "ticks tid comm". */
const GUEST_SCRIPT = `
snap() { cat /proc/[0-9]*/task/[0-9]*/stat 2>/dev/null; }
snap > /tmp/hangar-idle.a; sleep ${WINDOW_S}; snap > /tmp/hangar-idle.b
awk 'function parse(line,   i, j, f) {
       i = index(line, ") "); j = index(line, " (")
       key = substr(line, 1, j - 1) " " substr(line, j + 2, i - j - 2)
       split(substr(line, i + 2), f, " "); val = f[12] + f[13]
     }
     NR == FNR { parse($0); before[key] = val; next }
     { parse($0); d = val - before[key]; if (d > 0) print d, key }' /tmp/hangar-idle.a /tmp/hangar-idle.b | sort -rn
rm -f /tmp/hangar-idle.a /tmp/hangar-idle.b
`;

/** CPU seconds (user + system) of the QEMUs whose command line names `dir`. */
function qemuCpuSeconds(dir: string): number {
  let ticks = 0;
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const command = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (!command.startsWith("qemu-system") || !command.includes(dir)) continue;
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone meanwhile
    }
  }
  return ticks / TICKS;
}

const image = await ensureGuestImage();
const guests = await startGuestHost("hangar-bench-idle-");
const { dir, svc } = guests;
try {
  await guests.createDesktop(VM, image);
  await svc("POST", `/svc/vms/${VM}/run`, {});
  const { computerServerUrl: url } = await svc("GET", `/svc/vms/${VM}?wait=ready&timeout=900`);
  await postCmd(url, { command: "screenshot", params: { format: "png" } });
  await postCmd(url, { command: "launch", params: { app: "mousepad" } });
  await sleep(SETTLE_S * 1000);

  const cpuBefore = qemuCpuSeconds(dir);
  const started = performance.now();
  const reply = await postCmd(url, {
    command: "run_command",
    params: { command: GUEST_SCRIPT, timeout: WINDOW_S + 120 },
  });
  const seconds = (performance.now() - started) / 1000;
  const hostCpu = qemuCpuSeconds(dir) - cpuBefore;
  const stdout = (reply.event as { content?: { stdout?: string } } | undefined)?.content?.stdout;
  if (!stdout) throw new Error(`the guest's reading failed: ${JSON.stringify(reply.event).slice(0, 300)}`);
  const threads = stdout
    .trim()
    .split("\n")
    .map((line) => {
      const [ticks, tid, ...comm] = line.split(" ");
      return { ticks: Number(ticks), tid, comm: comm.join(" ") };
    });
  const guestTicks = threads.reduce((sum, t) => sum + t.ticks, 0);

  console.log(`\n### An idle full guest desktop (TCG), over ${WINDOW_S} s (${machineLoad()})\n`);
  console.log(
    `- its QEMU on the host: ${hostCpu.toFixed(2)} s of CPU in ${seconds.toFixed(1)} s, ` +
      `${((hostCpu / seconds) * 100).toFixed(1)} % of a core`,
  );
  console.log(
    `- inside the guest: ${(guestTicks / TICKS).toFixed(2)} s of its CPU time, ` +
      `${((guestTicks / TICKS / WINDOW_S) * 100).toFixed(1)} % of a vCPU\n`,
  );
  console.log("| the guest's thread | CPU in the window | share |");
  console.log("|---|---|---|");
  for (const t of threads.slice(0, 15)) {
    console.log(
      `| ${t.comm} (${t.tid}) | ${(t.ticks / TICKS).toFixed(2)} s | ${((t.ticks / guestTicks) * 100).toFixed(0)} % |`,
    );
  }
} finally {
  await guests.close();
}
