/**
 * E2B's SDK against the host service's E2B listener, on container desktops (podman's API service
 * started here, the project's image from scripts/test-image.sh's cache):
 *
 * - `Sandbox.create()` → the first `commands.run('true')` answered, cold (a new desktop each time);
 * - the same from a warm pool of 2 (the create is a claim);
 * - `commands.run('true')` round trip on a running sandbox, beside the computer server's own
 *   `/cmd run_command true` on the same desktop.
 *
 * A desktop image without envd has no `commands.run`: its rows say so instead of a figure.
 * Run: node --import tsx bench/e2b.ts [--runs N]
 */
import { Sandbox } from "e2b";
import { desktopCommand } from "../test/host/desktop-client.js";
import { E2B_KEY, sdkOptions } from "../test/host/e2b-support.js";
import { startPodman, TEST_IMAGE, testUlimits } from "../test/host/podman.js";
import { poolReady, startTestHost } from "../test/host/support.js";
import { median, ms, p95, printTable, type Row, sample } from "./lib.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const RUNS = arg("--runs", 5);

const engine = await startPodman();
const host = await startTestHost({
  containerEngine: engine.address,
  desktopImage: TEST_IMAGE,
  containerUlimits: testUlimits(),
  defaultRuntime: "container",
  e2b: { port: 0, env: { HANGAR_E2B_API_KEYS: E2B_KEY } },
});
const options = { ...sdkOptions(host.service.e2b?.url ?? ""), timeoutMs: 600_000 };
const rows: Row[] = [];

/** Create → first command answered, `runs` times; the sandboxes are killed after each. */
async function createToCommand(template: string, before?: () => Promise<void>): Promise<number[] | string> {
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    await before?.();
    const started = performance.now();
    const sandbox = await Sandbox.create(template, options);
    try {
      const result = await sandbox.commands.run("true");
      if (result.exitCode !== 0) throw new Error(`exit ${result.exitCode}`);
      times.push(performance.now() - started);
    } catch (err) {
      return `no commands.run: ${(err as Error).message.slice(0, 80)}`;
    } finally {
      await sandbox.kill();
    }
  }
  return times;
}

function row(name: string, result: number[] | string, target: string): Row {
  return typeof result === "string"
    ? { name, median: "—", p95: "—", target, note: result }
    : { name, median: ms(median(result)), p95: ms(p95(result)), target, note: `${result.length} runs` };
}

try {
  rows.push(row("Sandbox.create() → first commands.run answered, cold", await createToCommand("base"), "—"));

  await host.api("POST", "/svc/pools", {
    name: "e2b-bench",
    template: TEST_IMAGE,
    runtime: "container",
    size: 2,
  });
  rows.push(
    row(
      "Sandbox.create() → first commands.run answered, warm pool of 2",
      await createToCommand("e2b-bench", () => poolReady(host, "e2b-bench", 2)),
      "≤ 200 ms median",
    ),
  );
  await host.api("DELETE", "/svc/pools/e2b-bench");

  const sandbox = await Sandbox.create("base", options);
  try {
    const vm = (await host.api("GET", `/svc/vms/e2b-${sandbox.sandboxId}`)).body;
    const sdk = await sample(50, () => sandbox.commands.run("true"), { warmup: 5 }).catch(
      (err: Error) => `no commands.run: ${err.message.slice(0, 80)}`,
    );
    rows.push(row("commands.run('true') round trip (envd, through the host's router)", sdk, "—"));
    const cmd = await sample(50, () => desktopCommand(vm, "run_command", { command: "true" }), { warmup: 5 });
    rows.push(row("/cmd run_command true round trip (the computer server, directly)", cmd, "—"));
  } finally {
    await sandbox.kill();
  }
} finally {
  printTable("E2B's SDK against Hangar (container desktops, podman)", rows);
  await host.cleanup();
  await engine.cleanup();
}
