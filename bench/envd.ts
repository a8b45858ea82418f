/**
 * envd benchmark (issue 42): a command's round trip through E2B's envd beside Hangar's own `/cmd`
 * run_command, and 50 MB up and down through envd's `/files` beside Hangar's `PUT`/`GET /files`,
 * on one `hangar serve --envd-port` (warm shells on, as by default).
 *
 * - `/cmd run_command true`: `/bin/sh -c true` in a warm shell.
 * - `envd Start /bin/sh -c true`: the same work through envd (Connect, JSON as the SDK sends it).
 * - `e2b commands.run('true')`: the unmodified SDK, which runs `/bin/bash -l -c true`: a login
 *   shell reads the profile first. The server gets a fresh HOME so that this machine's own login
 *   profile (its ~/.profile) is not what is measured.
 *
 * Run after `npm run build`: node --import tsx bench/envd.ts [--rounds 5]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { Sandbox } from "e2b";
import { Process } from "../src/computer/transports/envd/gen/process/process_pb.js";
import { median, ms, p95, printMarkdown, sample } from "./lib.js";
import { cmd, freePort, getFile, putFile, spawnHangar } from "./support.js";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "5" } } });
const ROUNDS = Number(values.rounds);
const BURST = 20;
const MB = 1024 * 1024;
const SIZE = 50 * MB;

const home = mkdtempSync(join(tmpdir(), "hangar-bench-envd-"));
const envdPort = await freePort();
const server = await spawnHangar(["serve", "--no-virtual-display", "--envd-port", String(envdPort)], {
  HOME: home,
});
const envdUrl = `http://127.0.0.1:${envdPort}`;
// The server answers /status a moment before envd's listener is up.
for (let i = 0; i < 200; i++) {
  const up = await fetch(`${envdUrl}/health`).then(
    (r) => r.status === 204,
    () => false,
  );
  if (up) break;
  await sleep(50);
}
const SandboxClass = Sandbox as unknown as new (opts: Record<string, unknown>) => Sandbox;
const sbx = new SandboxClass({ sandboxId: "bench", envdVersion: "0.6.4", sandboxUrl: envdUrl, apiKey: "-" });
const rpc = createClient(
  Process,
  createConnectTransport({ baseUrl: envdUrl, httpVersion: "1.1", useBinaryFormat: false }),
);

const runs: Record<string, () => Promise<unknown>> = {
  "/cmd run_command `true`": async () => {
    const r = await cmd(server.url, "run_command", { command: "true" });
    if (r.return_code !== 0) throw new Error(`run_command: ${JSON.stringify(r)}`);
  },
  "envd Start `/bin/sh -c true`": async () => {
    let code: number | undefined;
    // No stdin pipe, as the SDK asks unless told otherwise: the command can take a warm shell.
    for await (const res of rpc.start({ process: { cmd: "/bin/sh", args: ["-c", "true"] }, stdin: false })) {
      if (res.event?.event.case === "end") code = res.event.event.value.exitCode;
    }
    if (code !== 0) throw new Error(`envd Start ended with ${code}`);
  },
  "e2b `commands.run('true')` (bash -l)": async () => {
    const r = await sbx.commands.run("true");
    if (r.exitCode !== 0) throw new Error(`commands.run: ${r.exitCode}`);
  },
};

const chunk = Buffer.alloc(MB, 0x5a);
const big = join(home, "big.bin");
const transfers: Record<string, () => Promise<unknown>> = {
  "e2b `files.write` 50 MB (octet-stream, streamed)": () => {
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= SIZE) return controller.close();
        sent += chunk.length;
        controller.enqueue(new Uint8Array(chunk));
      },
    });
    return sbx.files.write(big, body);
  },
  "e2b `files.read` 50 MB (stream)": async () => {
    let size = 0;
    for await (const part of await sbx.files.read(big, { format: "stream" })) size += part.length;
    if (size !== SIZE) throw new Error(`read ${size} bytes`);
  },
  "Hangar `PUT /files` 50 MB": () => putFile(`${server.url}/files${big}`, chunk, SIZE / MB),
  "Hangar `GET /files` 50 MB": async () => {
    const size = await getFile(`${server.url}/files${big}`);
    if (size !== SIZE) throw new Error(`got ${size} bytes`);
  },
};

const times: Record<string, number[]> = Object.fromEntries(
  [...Object.keys(runs), ...Object.keys(transfers)].map((name) => [name, []]),
);
try {
  for (const fn of [...Object.values(runs), ...Object.values(transfers)]) await fn();
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, fn] of Object.entries(runs)) {
      times[name].push(...(await sample(BURST, fn, { warmup: 2 })));
    }
    for (const [name, fn] of Object.entries(transfers)) {
      times[name].push(...(await sample(1, fn, { warmup: 0 })));
    }
  }
  const rows = Object.keys(runs).map((name) => [name, ms(median(times[name])), ms(p95(times[name])), ""]);
  for (const name of Object.keys(transfers)) {
    const rates = times[name].map((t) => SIZE / MB / (t / 1000));
    rows.push([
      name,
      ms(median(times[name])),
      ms(p95(times[name])),
      `${Math.round(median(rates))} MB/s median, ${Math.round(Math.min(...rates))} MB/s slowest`,
    ]);
  }
  printMarkdown(
    `envd beside /cmd and /files (${ROUNDS} rounds; ${BURST} commands a round, one transfer a round)`,
    ["what", "median", "p95", "rate"],
    rows,
  );
  console.log(`\n(server RSS after the runs: ${server.rssMb().toFixed(1)} MB)`);
} finally {
  await server.stop();
  rmSync(home, { recursive: true, force: true });
}
