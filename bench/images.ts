/**
 * Image push and pull on loopback against a real registry (Debian's docker-registry): a 2 GiB
 * sparse disk holding 256 MiB of random (incompressible) data in four 64 MiB runs. Each push and
 * pull runs in a child process so that its peak RSS is its own. Throughput is logical disk size
 * over wall time. Targets: push >= 100 MB/s, pull >= 200 MB/s, peak RSS <= 300 MB.
 *
 *   npm run build && node --import tsx bench/images.ts [--runs 3]
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, open, rm } from "node:fs/promises";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { PACKAGE_ROOT } from "../src/common/version.js";
import { startRegistry } from "../test/support/registry.js";
import { makeVmDir } from "../test/support/vm-dir.js";
import { printTable, type Row, summarize } from "./lib.js";

const MiB = 1024 * 1024;
const DISK = 2048 * MiB;
const DATA_RUNS = [0, 612 * MiB, 1324 * MiB, 1984 * MiB];
const RUN_BYTES = 64 * MiB;

interface ChildResult {
  seconds: number;
  maxRssMb: number;
  /** User + system CPU time of every thread of the child. */
  cpuSeconds: number;
}

/**
 * One push or pull, in a child process of its own; prints a ChildResult. Plain JavaScript run
 * against the built `dist/` (what `hangar host serve` runs), so that tsx is not in the figures.
 */
const CHILD = `
const [mode, specText] = process.argv.slice(1);
const spec = JSON.parse(specText);
const { pullImage, pushVm } = await import(spec.module);
const started = performance.now();
const common = { registry: spec.registry, organization: "bench", credentials: null };
if (mode === "push") await pushVm({ vmDir: spec.vmDir, imageName: spec.image, tags: ["latest"], ...common });
else await pullImage({ image: spec.image + ":latest", destDir: spec.dest, cacheDirectory: spec.cache, ...common });
const usage = process.resourceUsage();
process.stdout.write(JSON.stringify({
  seconds: (performance.now() - started) / 1000,
  maxRssMb: usage.maxRSS / 1024,
  cpuSeconds: (usage.userCPUTime + usage.systemCPUTime) / 1e6,
}));
`;

const BUILT = join(PACKAGE_ROOT, "dist", "src", "host", "oci", "index.js");

function runChild(mode: string, spec: Record<string, string>): ChildResult {
  const out = execFileSync(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      CHILD,
      mode,
      JSON.stringify({ ...spec, module: pathToFileURL(BUILT).href }),
    ],
    { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] },
  );
  return JSON.parse(out) as ChildResult;
}

async function main() {
  if (!existsSync(BUILT)) throw new Error("Build first (npm run build): the benchmark runs dist/");
  const runs = Number(process.argv[process.argv.indexOf("--runs") + 1]) || 3;
  const work = await mkdtemp(join(tmpdir(), "hangar-bench-images-"));
  const registry = await startRegistry();
  try {
    const vmDir = join(work, "vm");
    await makeVmDir(vmDir, { diskSize: DISK, writes: [] });
    const disk = await open(join(vmDir, "disk.img"), "r+");
    for (const offset of DATA_RUNS) {
      for (let at = 0; at < RUN_BYTES; at += 8 * MiB)
        await disk.write(randomBytes(8 * MiB), 0, 8 * MiB, offset + at);
    }
    await disk.close();

    const push: ChildResult[] = [];
    const pull: ChildResult[] = [];
    for (let i = 0; i < runs; i++) {
      const image = `disk${i}`;
      push.push(runChild("push", { vmDir, image, registry: registry.host }));
      const dest = join(work, `pulled${i}`);
      pull.push(runChild("pull", { image, registry: registry.host, dest, cache: join(work, "cache") }));
      await rm(dest, { recursive: true, force: true });
    }
    // Throughput from the median and the p95 (slow end) of the wall times.
    const throughput = (results: ChildResult[]) => {
      const { median, p95 } = summarize(
        results.map((r) => r.seconds),
        "s",
        3,
      );
      const mbps = (text: string) => `${(DISK / 1e6 / Number.parseFloat(text)).toFixed(0)} MB/s`;
      return { median: mbps(median), p95: mbps(p95) };
    };
    const rowsFor = (what: string, results: ChildResult[], target: string): Row[] => [
      { name: `${what} (MB/s of logical disk)`, ...throughput(results), target },
      {
        name: `${what} CPU time (all threads)`,
        ...summarize(
          results.map((r) => r.cpuSeconds),
          "s",
          1,
        ),
      },
      {
        name: `${what} peak RSS`,
        ...summarize(
          results.map((r) => r.maxRssMb),
          "MB",
          0,
        ),
        target: "<= 300 MB",
      },
    ];
    const rows = [...rowsFor("push", push, ">= 100 MB/s"), ...rowsFor("pull", pull, ">= 200 MB/s")];
    console.log(
      `load average during the runs: ${loadavg()[0].toFixed(1)} on ${availableParallelism()} cores`,
    );
    printTable(`Images on loopback: 2 GiB disk, 256 MiB random data, 512 MiB chunks (${runs} runs)`, rows);
  } finally {
    await registry.stop();
    await rm(work, { recursive: true, force: true });
  }
}

await main();
