/**
 * Nothing the suite starts outlives it: the global set-up of every project (vitest.config.ts).
 *
 * The first project to set up gives the run an id and a temporary directory of its own, as
 * `HANGAR_TEST_RUN` and `TMPDIR` in the environment that the workers, and so every process a test
 * starts, inherit. The last project to tear down (after the others' teardowns, the cluster's stop
 * included) looks from /proc, as an operator would, for processes that carry the id in their
 * environment or name the directory on their command line, and for anything left in the directory.
 * It kills and removes what it finds, and fails the run with the list.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const RUN_ENV = "HANGAR_TEST_RUN";
/**
 * Left without failing the run, and killed: a daemon that a test's program starts for the whole
 * display and that ends by itself (lxpanel's menu starts menu-cached, which exits a minute after its
 * last client; `dbus-launch --autolaunch`, which GTK starts for a program that names no session bus
 * and which ends a few seconds after its display; podman's `conmon` of an exec session, which ends a moment after the container it
 * ran in was removed; the group reaper of a test worker that spawned a shell, src/os/group-reaper.ts,
 * which ends with that worker, stopped after the teardowns), and in the temporary directory tsx's compile cache, Chromium's scratch
 * directories (`org.chromium.Chromium.*`, left by a browser that ended with its desktop: the browser
 * itself is a process, and still counted) and PulseAudio's runtime directory of the user
 * (`pulse-*`: libpulse makes it for a client that names no server, such as a test's Chromium
 * playing a page's sound, when ~/.config/pulse's link to the last one points nowhere).
 */
const LINGERING = /(^|\/)(menu-cached|conmon|dbus-launch --autolaunch) | hangar-group-reaper$/;
const CACHES = /^(tsx-\d+|org\.chromium\.Chromium\.\w+|pulse-\w+)$/;

interface Run {
  id: string;
  dir: string;
  /** Projects set up and not yet torn down. */
  open: number;
}

/** One run per vitest process, whichever project's copy of this module sets up first. */
const RUN = Symbol.for("hangar.test-run");
const shared = globalThis as { [RUN]?: Run };

export default function setup() {
  if (!shared[RUN]) {
    const dir = mkdtempSync(join(tmpdir(), "hangar-test-run-"));
    shared[RUN] = { id: `${process.pid}-${Date.now()}`, dir, open: 0 };
    process.env[RUN_ENV] = shared[RUN].id;
    process.env.TMPDIR = dir;
  }
  const run = shared[RUN];
  run.open++;
  return () => {
    run.open--;
    if (run.open > 0) return;
    const report = leftovers(run);
    try {
      rmSync(run.dir, { recursive: true, force: true });
    } catch (err) {
      report.push(`  ${run.dir} could not be removed: ${(err as Error).message}`);
    }
    if (report.length > 0) {
      // An error thrown here would only be logged: vitest keeps the exit code of the tests.
      process.exitCode = 1;
      process.stderr.write(
        `\nFAIL: the suite left behind what it started (killed and removed now):\n${report.join("\n")}\n`,
      );
    }
  };
}

interface Found {
  pid: number;
  ppid: number;
  args: string;
}

/** The run's processes (killed once listed) and the files left in its directory, one line each. */
function leftovers(run: Run): string[] {
  const marker = `${RUN_ENV}=${run.id}`;
  const found: Found[] = [];
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (state === "Z") continue;
      const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
      const env = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
      // vitest's own workers, which it stops after the teardowns.
      if (Number(ppid) === process.pid && args.includes("vitest")) continue;
      if (env.includes(marker) || args.includes(run.dir)) found.push({ pid, ppid: Number(ppid), args });
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  for (const p of found) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // gone meanwhile
    }
  }
  const files = readdirSync(run.dir, { recursive: true })
    .map(String)
    .filter((file) => !CACHES.test(file.split("/")[0]));
  // The top level only, with how much lies below it: a podman storage holds thousands of files.
  const tops = new Map<string, number>();
  for (const file of files) {
    const top = file.split("/")[0];
    tops.set(top, (tops.get(top) ?? 0) + 1);
  }
  return [
    ...found
      .filter((p) => !LINGERING.test(p.args))
      .map((p) => `  process ${p.pid} (parent ${p.ppid}): ${p.args.slice(0, 300)}`),
    ...[...tops].map(([top, count]) => `  ${join(run.dir, top)}${count > 1 ? ` (${count} entries)` : ""}`),
  ];
}
