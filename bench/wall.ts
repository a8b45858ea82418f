/**
 * The host page's wall: what N live tiles cost the host service and the page. N container desktops
 * (podman's API service started here, the project's image from scripts/test-image.sh's cache), each
 * changing its whole screen five times a second (a shell loop inside it repaints the root window),
 * shown in the wall of the host page in Debian's Chromium. Measured over windows of --window
 * seconds: the CPU of the host service (it runs in this process, which does nothing else meanwhile,
 * so its figure includes this process's own idle cost) and of every Chromium process, in cores, and
 * the pictures the page drew. The desktops' own CPU (capture, scaling, JPEG) is theirs, not counted.
 *
 * Run: node --import tsx bench/wall.ts [--tiles N] [--windows N] [--window S] [--display WxH]
 * (after npm run build; 4 tiles of 1280x800 by default)
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { desktopCommand } from "../test/host/desktop-client.js";
import { startPodman, TEST_IMAGE, testUlimits } from "../test/host/podman.js";
import { startTestHost } from "../test/host/support.js";
import { launchBrowser } from "../test/support/browser.js";
import { median, p95, printTable } from "./lib.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const TILES = arg("--tiles", 4);
const WINDOWS = arg("--windows", 5);
const WINDOW_S = arg("--window", 10);
/** The desktops' screen: the tiles' pictures are ~320 px wide whatever it is, only the desktops' own cost grows. */
const DISPLAY = process.argv.includes("--display")
  ? process.argv[process.argv.indexOf("--display") + 1]
  : "1280x800";
const DESKTOP = { os: "linux", cpu: 1, memory: "1GB", diskSize: "4GB", display: DISPLAY };
const TICKS = 100; // USER_HZ: /proc's CPU times are in hundredths of a second on Linux

/** CPU seconds of every process of Chromium that descends from this process. */
function chromiumSeconds(): number {
  const parents = new Map<number, number>();
  const times = new Map<number, number>();
  const chromium = new Set<number>();
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      parents.set(pid, Number(fields[1]));
      times.set(pid, (Number(fields[11]) + Number(fields[12])) / TICKS);
      if (/chrom/.test(readlinkSync(`/proc/${pid}/exe`))) chromium.add(pid);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  const ours = (pid: number) => {
    for (let p = pid; p > 1; p = parents.get(p) ?? 0) if (p === process.pid) return true;
    return false;
  };
  let total = 0;
  for (const pid of chromium) if (ours(pid)) total += times.get(pid) ?? 0;
  return total;
}

const engine = await startPodman();
const host = await startTestHost({
  containerEngine: engine.address,
  desktopImage: TEST_IMAGE,
  containerUlimits: testUlimits(),
  defaultRuntime: "container",
});
const browser = await launchBrowser();
try {
  const names = Array.from({ length: TILES }, (_, i) => `tile-${i + 1}`);
  for (const name of names) await host.api("POST", "/svc/vms", { name, ...DESKTOP });
  await Promise.all(names.map((name) => host.api("POST", `/svc/vms/${name}/run`, {})));
  for (const name of names) {
    const ready = await host.api("GET", `/svc/vms/${name}?wait=ready&timeout=300`);
    if (ready.status !== 200) throw new Error(`${name} did not start: ${ready.text}`);
    // Five new colours a second over the whole screen, until the desktop goes.
    const loop =
      'nohup sh -c \'while :; do xsetroot -solid "#$(od -An -N3 -tx1 /dev/urandom | tr -d " ")"; sleep 0.2; done\' >/dev/null 2>&1 &';
    const out = await desktopCommand(ready.body, "run_command", { command: loop });
    if (!out.result.success) throw new Error(`${name}: ${JSON.stringify(out.result)}`);
  }
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(host.url);
  await page.waitForFunction(
    (n) => document.querySelectorAll("#wall .tile[data-frames]").length >= n,
    TILES,
    { timeout: 60_000 },
  );
  const frames = () =>
    page.evaluate(() =>
      [...document.querySelectorAll<HTMLElement>("#wall .tile")].reduce(
        (sum, tile) => sum + Number(tile.dataset.frames ?? 0),
        0,
      ),
    );
  const hostCores: number[] = [];
  const pageCores: number[] = [];
  const drawn: number[] = [];
  for (let i = 0; i < WINDOWS + 1; i++) {
    const start = {
      host: process.cpuUsage(),
      page: chromiumSeconds(),
      frames: await frames(),
      at: performance.now(),
    };
    await new Promise((resolve) => setTimeout(resolve, WINDOW_S * 1000));
    const seconds = (performance.now() - start.at) / 1000;
    const used = process.cpuUsage(start.host);
    if (i === 0) continue; // the first window warms up
    hostCores.push((used.user + used.system) / 1e6 / seconds);
    pageCores.push((chromiumSeconds() - start.page) / seconds);
    drawn.push(((await frames()) - start.frames) / seconds / TILES);
  }
  const cores = (xs: number[]) => ({
    median: `${median(xs).toFixed(3)} cores`,
    p95: `${p95(xs).toFixed(3)} cores`,
  });
  printTable(
    `The wall: ${TILES} live tiles of ${DISPLAY} desktops, each whole screen changing 5 times a second`,
    [
      { name: "host service (relay of every tile)", ...cores(hostCores) },
      { name: "the page (every Chromium process)", ...cores(pageCores) },
      {
        name: "both",
        ...cores(hostCores.map((h, i) => h + pageCores[i])),
        target: TILES === 16 ? "< 1 core" : `< 1 core at 16 tiles (${(TILES / 16).toFixed(2)} of it here)`,
      },
      {
        name: "pictures drawn per tile",
        median: `${median(drawn).toFixed(1)} /s`,
        p95: `${Math.min(...drawn).toFixed(1)} /s (fewest)`,
        note: "the page asks 4 a second",
      },
    ],
  );
} finally {
  await browser.close();
  await host.cleanup();
  await engine.cleanup();
}
