/**
 * What `--command-user` costs `run_command`: `echo hi` end to end over HTTP on three servers — warm
 * shells (the default), a shell spawned per command (`--warm-shells 0`), and a shell spawned per
 * command as the command user through setpriv (`--command-user nobody`, which has no warm shells).
 * Rounds of 30 commands back to back, interleaved between the servers. Needs root.
 * Run after `npm run build`: node --import tsx bench/command-user.ts [--rounds 5] [--user nobody]
 */
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
} finally {
  for (const side of sides) await side.server?.stop();
}
