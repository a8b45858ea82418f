/**
 * `npm run bench`: every benchmark, one after another, each in its own process so that none
 * measures another's leftovers. Each prints its own table. `npm run bench -- core desktop` runs some;
 * `npm run bench -- --compare URL [--display :N] [--only a,b]` runs Hangar beside another server
 * (bench/compare.ts).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

const ALL = [
  "core",
  "cmd-share",
  "memory",
  "start",
  "shell",
  "command-user",
  "transport",
  "desktop",
  "nut",
  "accessibility",
  "agent-transports",
  "agent-actions",
  "host",
  "containers",
  "e2b",
  "sleep",
  "idle-memory",
  "egress",
  "snapshots",
  "guest-snapshots",
  "guest-idle",
  "kubernetes",
  "images",
  "spread",
  "live",
  "live-h264",
  "wall",
  "recording",
  "trajectory",
  "osworld",
  "envd",
];
const args = process.argv.slice(2);
const compare = args.some((arg) => arg.startsWith("--compare"));
const chosen = compare ? [] : args.length > 0 ? args : ALL;

if (compare) {
  const run = spawnSync(process.execPath, ["--import", "tsx", "bench/compare.ts", ...args], {
    stdio: "inherit",
  });
  process.exitCode = run.status ?? 1;
}
for (const name of chosen) {
  const file = `bench/${name}.ts`;
  if (!existsSync(file)) {
    console.error(`no benchmark named ${name} (have: ${ALL.join(", ")})`);
    process.exitCode = 2;
    continue;
  }
  console.log(`\n## ${name}`);
  const run = spawnSync(process.execPath, ["--import", "tsx", file], { stdio: "inherit" });
  if (run.status !== 0) {
    console.error(`bench/${name}.ts exited with ${run.status ?? run.signal}`);
    process.exitCode = 1;
  }
}
