/**
 * Kubernetes desktops and warm pools on a real single-node cluster (started here from
 * ../shared/k8s, as the tests do; ports from HANGAR_K8S_PORT_BASE, default 17500):
 *
 * - Pod create → ready (its readiness probe on /status passed), with the light image (a tiny web
 *   server) and with the project's desktop (its image already on the node) → screenshot;
 * - claim from a warm pool of 4 (the claim call alone, then to the first /status through the relay);
 * - N desktops of the project's image on the one node: all ready and answering a screenshot, and
 *   their memory as the kubelet counts it (working set, 30 s later).
 *
 * Run: node --import tsx bench/kubernetes.ts [--runs N] [--many N] (--many 0 leaves the last out)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { desktopCommand } from "../test/host/desktop-client.js";
import { startTestHost, type TestHost } from "../test/host/support.js";
import { pushDesktopImage, startTestCluster } from "../test/kubernetes/global-setup.js";
import { machineLoad, median, ms, p95, printTable, type Row } from "./lib.js";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const RUNS = arg("--runs", 10);
const MANY = arg("--many", 20);
const LIGHT = { os: "linux", cpu: 1, memory: "128MB", diskSize: "256MB", display: "1024x768" };
const DESKTOP = { os: "linux", cpu: 1, memory: "1GB", diskSize: "1GB", display: "1280x800" };
const mb = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(0)} MB`;

const work = mkdtempSync(join(tmpdir(), "hangar-k8s-bench-"));
const { cluster, stop } = await startTestCluster(Number(process.env.HANGAR_K8S_PORT_BASE ?? 17500));
const config = new KubeConfig();
config.loadFromFile(cluster.kubeconfig);
const core = config.makeApiClient(CoreV1Api);
const namespace = "hangar-bench";
await core.createNamespace({ body: { metadata: { name: namespace } } });
const rows: Row[] = [];
let host: TestHost | undefined;

async function readyRecord(name: string, timeoutMs = 600_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = (await host?.api("GET", `/svc/vms/${name}`))?.body;
    if (r?.ready) return r;
    if (r?.status === "stopped" && r.lastError) throw new Error(`${name}: ${r.lastError}`);
    if (Date.now() > deadline) throw new Error(`${name} not ready in ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function waitPool(name: string, ready: number) {
  for (;;) {
    const p = (await host?.api("GET", `/svc/pools/${name}`))?.body;
    if (p.ready >= ready) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Each Pod's working set, as the kubelet's summary counts it. */
async function podMemory(): Promise<Map<string, number>> {
  const text = (await core.connectGetNodeProxyWithPath({
    name: "127.0.0.1",
    path: "stats/summary",
  })) as unknown;
  const summary = (typeof text === "string" ? JSON.parse(text) : text) as {
    pods?: { podRef: { name: string; namespace: string }; memory?: { workingSetBytes?: number } }[];
  };
  return new Map(
    (summary.pods ?? [])
      .filter((p) => p.podRef.namespace === namespace)
      .map((p) => [p.podRef.name, p.memory?.workingSetBytes ?? 0]),
  );
}

try {
  const pushStarted = performance.now();
  const image = await pushDesktopImage(cluster.registry, work);
  const pushMs = performance.now() - pushStarted;
  host = await startTestHost({
    defaultRuntime: "kubernetes",
    kubernetes: { kubeconfig: cluster.kubeconfig, namespace },
    desktopImage: image,
    stopGraceMs: 0,
    containerEngine: false,
  });
  rows.push({ name: "push the desktop image into the cluster's registry", median: ms(pushMs), p95: "" });

  // 1. Pod create → ready, light image.
  const light: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const name = `light-${i}`;
    await host.api("POST", "/svc/vms", { ...LIGHT, name, image: cluster.lightImage });
    const started = performance.now();
    await host.api("POST", `/svc/vms/${name}/run`, {});
    await readyRecord(name);
    light.push(performance.now() - started);
    await host.api("DELETE", `/svc/vms/${name}`);
  }
  rows.push({
    name: `Pod create → ready, light image (${RUNS})`,
    median: ms(median(light)),
    p95: ms(p95(light)),
  });

  // 2. Pod create → ready → screenshot, the project's desktop (the first run pulls the image to the node).
  const real: number[] = [];
  let firstRun = 0;
  for (let i = 0; i <= Math.min(RUNS, 5); i++) {
    const name = `desk-${i}`;
    await host.api("POST", "/svc/vms", { ...DESKTOP, name });
    const started = performance.now();
    await host.api("POST", `/svc/vms/${name}/run`, {});
    const record = await readyRecord(name);
    const shot = await desktopCommand(record, "screenshot");
    if (!shot.result.success) throw new Error(`no screenshot from ${name}`);
    if (i === 0) firstRun = performance.now() - started;
    else real.push(performance.now() - started);
    await host.api("DELETE", `/svc/vms/${name}`);
  }
  rows.push({
    name: `Pod create → ready → screenshot, desktop image on the node (${real.length})`,
    median: ms(median(real)),
    p95: ms(p95(real)),
    note: `first run, pulling the image: ${ms(firstRun)}`,
  });

  // 3. claims from a warm pool of 4 (light image: the claim path, not the desktop, is measured).
  await host.api("POST", "/svc/pools", { name: "bench", size: 4, template: cluster.lightImage, ...LIGHT });
  const claims: number[] = [];
  const reached: number[] = [];
  for (let i = 0; i < RUNS * 2; i++) {
    await waitPool("bench", 4);
    const started = performance.now();
    const desktop = (await host.api("POST", "/svc/pools/bench/claim", { wait: false })).body;
    claims.push(performance.now() - started);
    const status = await fetch(`${desktop.computerServerUrl}/status`);
    if (status.status !== 200) throw new Error(`the claimed desktop did not answer: ${status.status}`);
    reached.push(performance.now() - started);
    await host.api("POST", `/svc/vms/${desktop.name}/release`);
  }
  rows.push({
    name: `claim from a warm pool of 4 (${claims.length})`,
    median: ms(median(claims)),
    p95: ms(p95(claims)),
    target: "≤ 100 ms median",
  });
  rows.push({
    name: "claim → first /status through the relay",
    median: ms(median(reached)),
    p95: ms(p95(reached)),
  });
  await host.api("DELETE", "/svc/pools/bench");

  // 4. many desktops on the one node.
  if (MANY > 0) {
    const names = Array.from({ length: MANY }, (_, i) => `many-${i}`);
    const started = performance.now();
    await Promise.all(names.map((name) => host?.api("POST", "/svc/vms", { ...DESKTOP, name })));
    await Promise.all(names.map((name) => host?.api("POST", `/svc/vms/${name}/run`, {})));
    const answered = await Promise.all(
      names.map(async (name) => {
        try {
          const record = await readyRecord(name);
          return (await desktopCommand(record, "screenshot", {}, 120_000)).result.success === true;
        } catch (err) {
          console.error(`${name}: ${(err as Error).message}`);
          return false;
        }
      }),
    );
    const allMs = performance.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 30_000));
    const memory = await podMemory();
    // Pods that ended have no figure: left out.
    const each = names.flatMap((name) => memory.get(`hangar-${name}`) ?? []);
    rows.push({
      name: `${MANY} desktops on one node: all ready and answer a screenshot`,
      median: `${answered.filter(Boolean).length}/${MANY} in ${(allMs / 1000).toFixed(1)} s`,
      p95: "",
      note: `memory ${mb(each.reduce((a, b) => a + b, 0))} in all, ${mb(median(each))} median each of ${each.length} (working set, 30 s later)`,
    });
    await Promise.all(names.map((name) => host?.api("DELETE", `/svc/vms/${name}`)));
  }
} finally {
  printTable(`Kubernetes desktops (v1.20, one node; ${machineLoad()})`, rows);
  await host?.cleanup();
  await core.deleteNamespace({ name: namespace, gracePeriodSeconds: 0 }).catch(() => undefined);
  await stop();
  rmSync(work, { recursive: true, force: true });
}
