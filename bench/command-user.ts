/**
 * What `--command-user` costs `run_command`: `echo hi` end to end over HTTP on three servers — warm
 * shells (the default), a shell spawned per command (`--warm-shells 0`), and a shell spawned per
 * command as the command user through setpriv (`--command-user nobody`, which has no warm shells).
 * Rounds of 30 commands back to back, interleaved between the servers. Then the file commands
 * (`write_bytes` and `read_bytes` of 1 MiB) on the default server and the command user's, whose
 * files go through its file worker (src/os/agent-files.ts). Needs root.
 * Run after `npm run build`: node --import tsx bench/command-user.ts [--rounds 5] [--user nobody]
 */
import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { median, ms, p95, printMarkdown } from "./lib.js";
import { cmd, type SpawnedServer, spawnHangar } from "./support.js";

const { values } = parseArgs({
  options: { rounds: { type: "string", default: "5" }, user: { type: "string", default: "nobody" } },
});
const ROUNDS = Number(values.rounds);
const BURST = 30;
const PAUSE_MS = 300;

const sides: { name: string; args: string[]; server?: SpawnedServer; times: number[] }[] = [
  { name: "warm shells (default)", args: [], times: [] },
  { name: "spawned per command (--warm-shells 0)", args: ["--warm-shells", "0"], times: [] },
  { name: `as ${values.user} (--command-user)`, args: ["--command-user", values.user], times: [] },
];

try {
  for (const side of sides) side.server = await spawnHangar(["serve", "--no-virtual-display", ...side.args]);
  for (const side of sides) {
    const who = await cmd(side.server!.url, "run_command", { command: "id -un" });
    console.error(`${side.name}: runs as ${String(who.content?.stdout).trim()}`);
    for (let i = 0; i < 3; i++) await cmd(side.server!.url, "run_command", { command: "echo hi" });
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const side of sides) {
      for (let i = 0; i < BURST; i++) {
        const start = performance.now();
        const reply = await cmd(side.server!.url, "run_command", { command: "echo hi" });
        side.times.push(performance.now() - start);
        if (reply.content?.stdout !== "hi\n") throw new Error(`unexpected reply: ${JSON.stringify(reply)}`);
      }
      await sleep(PAUSE_MS);
    }
  }
  printMarkdown(
    `run_command "echo hi" over HTTP, ${ROUNDS} rounds of ${BURST}`,
    ["server", "median", "p95"],
    sides.map((s) => [s.name, ms(median(s.times)), ms(p95(s.times))]),
  );
  // The file commands: this process's own files, or the command user's file worker.
  const payload = randomBytes(1024 * 1024).toString("base64");
  const fileSides = [sides[0], sides[2]].map((side) => ({
    side,
    path: join(tmpdir(), `hangar-bench-files-${process.pid}-${side.args.length}.bin`),
    write: [] as number[],
    read: [] as number[],
  }));
  for (let round = 0; round < ROUNDS; round++) {
    for (const f of fileSides) {
      for (let i = 0; i < 10; i++) {
        let start = performance.now();
        const wrote = await cmd(f.side.server!.url, "write_bytes", { path: f.path, content_b64: payload });
        f.write.push(performance.now() - start);
        start = performance.now();
        const read = await cmd(f.side.server!.url, "read_bytes", { path: f.path });
        f.read.push(performance.now() - start);
        if (!wrote.success || read.content?.content_b64 !== payload)
          throw new Error("the file did not come back");
      }
      await sleep(PAUSE_MS);
    }
  }
  for (const f of fileSides) await rm(f.path, { force: true });
  printMarkdown(
    `write_bytes then read_bytes of 1 MiB over HTTP, ${ROUNDS} rounds of 10`,
    ["server", "write median", "write p95", "read median", "read p95"],
    fileSides.map((f) => [
      f.side.name,
      ms(median(f.write)),
      ms(p95(f.write)),
      ms(median(f.read)),
      ms(p95(f.read)),
    ]),
  );
} finally {
  for (const side of sides) await side.server?.stop();
}
