/**
 * Warm pools of Kubernetes desktops (the pool manager on the Kubernetes runtime) on a real cluster:
 * a claim hands out a ready Pod's desktop at once, reachable through the record's address; a
 * release deletes its Pod and the pool refills; a Pod deleted from outside is replaced; a host
 * service killed with -9 while a desktop is being started, its pools kept in a ConfigMap, leaves no
 * orphan Pod once it comes back with no state of its own (another home).
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { connectCluster } from "../../src/host/kubernetes/cluster.js";
import { ConfigMapPoolStore } from "../../src/host/kubernetes/configmap-pool-store.js";
import type { PoolMember } from "../../src/host/pools/pool-types.js";
import type { TestHost } from "../host/support.js";
import {
  type ChildHost,
  startChildHost,
  startKubernetesHost,
  type TestNamespace,
  tempRoot,
  testNamespace,
} from "./cluster.js";

let ns: TestNamespace;
let host: TestHost;

beforeAll(async () => {
  ns = await testNamespace("hangar-pools");
  host = await startKubernetesHost(ns, { pools: { checkIntervalMs: 500 } });
}, 60_000);
afterAll(async () => {
  await host?.cleanup();
  await ns?.cleanup();
});

type Api = { api: TestHost["api"] };
const pool = async (name: string, h: Api = host) => (await h.api("GET", `/svc/pools/${name}`)).body;
/** Each member's state, and where a start under way is, as the pool's record tells them. */
const memberStates = (p: { desktops: { name: string; state: string; startStep: string | null }[] }) =>
  p.desktops.map((d) => `; ${d.name} ${d.state}${d.startStep ? `: ${d.startStep}` : ""}`).join("");
/** The host service's log lines about pools (a leader that stepped down, a start that failed). */
async function poolLog(h: Api): Promise<string> {
  const home = (h as Partial<TestHost>).home;
  if (!home) return "";
  const lines: string[] = [];
  for (const file of ["info.log", "error.log"]) {
    const text = await readFile(join(home, ".logs", file), "utf8").catch(() => "");
    lines.push(...text.split("\n").filter((line) => /[Pp]ool|[Ll]ease|lead/.test(line)));
  }
  return lines.slice(-30).join("\n");
}
const readyCount = async (name: string, count: number, h: Api = host, timeout = 120_000) => {
  try {
    return await vi.waitFor(
      async () => {
        const p = await pool(name, h);
        if (p.ready !== count)
          throw new Error(`${p.ready} ready of ${count} (${p.lastError ?? "no error"}${memberStates(p)})`);
        return p;
      },
      { timeout, interval: 100 },
    );
  } catch (err) {
    // What the service said meanwhile, to tell a pool that stopped refilling from a slow one.
    throw new Error(`${(err as Error).message}\nthe host's log about pools:\n${await poolLog(h)}`);
  }
};
const podsOf = async (prefix: string) => (await ns.pods()).filter((p) => p.startsWith(`hangar-${prefix}-`));

describe("a pool on the cluster", () => {
  it("hands out a ready desktop at once; release deletes its Pod and the pool refills", async () => {
    const created = await host.api("POST", "/svc/pools", {
      name: "warm",
      size: 2,
      runtime: "kubernetes",
      template: ns.lightImage,
      memory: "128MB",
      diskSize: "256MB",
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: "warm",
      runtime: "kubernetes",
      templateKind: "image",
      size: 2,
    });
    await readyCount("warm", 2);
    expect(await podsOf("warm")).toHaveLength(2);

    const started = performance.now();
    const claim = await host.api("POST", "/svc/pools/warm/claim", { owner: "harness", wait: false });
    const ms = performance.now() - started;
    expect(claim.status).toBe(200);
    expect(claim.body).toMatchObject({ pool: "warm", status: "running", ready: true, runtime: "kubernetes" });
    expect(claim.body.claim.by).toBe("harness");
    // A claim from a warm pool is an in-memory pick and one store write: well under a second here.
    expect(ms).toBeLessThan(1000);
    expect((await fetch(`${claim.body.computerServerUrl}/status`)).status).toBe(200);

    await readyCount("warm", 2);
    expect(await podsOf("warm")).toHaveLength(3);
    expect((await host.api("POST", `/svc/vms/${claim.body.name}/release`)).status).toBe(200);
    await vi.waitFor(async () => expect(await podsOf("warm")).toHaveLength(2), { timeout: 30_000 });
    expect(await podsOf("warm")).not.toContain(`hangar-${claim.body.name}`);
  }, 240_000);

  it("replaces a desktop whose Pod is deleted from outside", async () => {
    const before = await readyCount("warm", 2);
    const victim = before.desktops[0].name as string;
    await ns.core.deleteNamespacedPod({
      name: `hangar-${victim}`,
      namespace: ns.name,
      gracePeriodSeconds: 0,
    });
    await vi.waitFor(
      async () => {
        const p = await pool("warm");
        if (p.desktops.some((d: { name: string }) => d.name === victim))
          throw new Error(`${victim} still a member`);
      },
      { timeout: 30_000, interval: 100 },
    );
    await readyCount("warm", 2);
    expect((await host.api("DELETE", "/svc/pools/warm")).status).toBe(200);
    await vi.waitFor(async () => expect(await podsOf("warm")).toEqual([]), { timeout: 30_000 });
    const secrets = await ns.core.listNamespacedSecret({
      namespace: ns.name,
      labelSelector: "hangar.dev/desktop",
    });
    expect(secrets.items).toEqual([]);
  }, 240_000);
});

describe("pools kept in a ConfigMap", () => {
  it("two stores on one ConfigMap: a desktop is claimed once, the loser sees why", async () => {
    const cluster = connectCluster({ kubeconfig: ns.kubeconfig, namespace: ns.name });
    const name = "hangar-pools-race";
    const a = new ConfigMapPoolStore(cluster, name);
    const b = new ConfigMapPoolStore(cluster, name);
    await a.createPool({
      name: "race",
      runtime: "kubernetes",
      template: { kind: "image", image: ns.lightImage },
      spec: { cpu: 1, memory: "128MB", diskSize: "256MB", display: "1024x768" },
      min: 1,
      max: 1,
      target: 1,
      ttlSeconds: null,
      onExpire: "release",
      idleTimeoutSeconds: null,
      createdAt: new Date().toISOString(),
    });
    await a.addMember({
      name: "race-1",
      pool: "race",
      state: "ready",
      createdAt: new Date().toISOString(),
      readyAt: new Date().toISOString(),
      claim: null,
    });
    // B read before A's claim: its write carries an old version and is refused, then tried again.
    expect((await b.load()).members).toHaveLength(1);
    const claim = (by: string) => (m: PoolMember) => {
      if (m.state !== "ready") throw new Error(`race-1 is no longer ready (claimed by ${m.claim?.by})`);
      return {
        ...m,
        state: "claimed" as const,
        claim: { by, at: new Date().toISOString(), expiresAt: null },
      };
    };
    const results = await Promise.allSettled([
      a.updateMember("race-1", claim("a")),
      b.updateMember("race-1", claim("b")),
    ]);
    const won = results.filter((r) => r.status === "fulfilled");
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(String(lost[0].reason)).toMatch(/no longer ready \(claimed by [ab]\)/);
    const stored = await new ConfigMapPoolStore(cluster, name).load();
    expect(stored.members[0].claim?.by).toBe((won[0] as PromiseFulfilledResult<PoolMember>).value.claim?.by);
    await a.removePool("race");
    expect(await new ConfigMapPoolStore(cluster, name).load()).toEqual({ pools: [], members: [] });
    await Promise.all([a.close(), b.close()]);
  });
});

describe("a host service killed with -9 during a claim, its pools in the cluster", () => {
  // Each start has a home of its own: what the service comes back with is the cluster's only.
  const first = tempRoot("hangar-k8s-kill-");
  const second = tempRoot("hangar-k8s-kill-");
  let service: ChildHost | undefined;
  afterAll(() => {
    if (service?.child.exitCode === null) service.child.kill("SIGKILL");
    first.remove();
    second.remove();
  });
  const start = (root: string) =>
    startChildHost(root, {
      defaultRuntime: "kubernetes",
      // The killed service's Lease is taken over once it expires: a short one here.
      kubernetes: {
        kubeconfig: ns.kubeconfig,
        namespace: ns.name,
        poolsInCluster: true,
        leaseDurationSeconds: 3,
      },
      desktopImage: ns.lightImage,
      containerEngine: false,
      stopGraceMs: 0,
      pools: { checkIntervalMs: 500 },
    });

  it("leaves no orphan Pod once it comes back elsewhere, and keeps the claim", async () => {
    service = await start(first.root);
    const svc = service;
    expect(
      (
        await svc.api("POST", "/svc/pools", {
          name: "kill",
          size: 1,
          template: ns.lightImage,
          memory: "128MB",
          diskSize: "256MB",
        })
      ).status,
    ).toBe(201);
    await readyCount("kill", 1, svc);
    const claimed = (await svc.api("POST", "/svc/pools/kill/claim", { owner: "survivor" })).body;
    // The claim starts a replacement: kill the service while it is being made.
    const starting = await vi.waitFor(
      async () => {
        const names = (await pool("kill", svc)).desktops
          .filter((d: { state: string }) => d.state === "starting")
          .map((d: { name: string }) => d.name);
        if (names.length === 0) throw new Error("nothing starting");
        return names as string[];
      },
      { timeout: 10_000, interval: 10 },
    );
    svc.child.kill("SIGKILL");
    await new Promise((resolve) => svc.child.once("exit", resolve));

    service = await start(second.root);
    const after = await pool("kill", service);
    expect(after.desktops.find((d: { name: string }) => d.name === claimed.name)).toMatchObject({
      state: "claimed",
      claimedBy: "survivor",
    });
    await vi.waitFor(
      async () => {
        const pods = await ns.pods();
        for (const name of starting)
          if (pods.includes(`hangar-${name}`)) throw new Error(`${name} still there`);
      },
      { timeout: 30_000, interval: 100 },
    );
    await readyCount("kill", 1, service);
    // The claimed desktop's Pod kept running, and the restarted service relays to it.
    const record = (await service.api("GET", `/svc/vms/${claimed.name}`)).body;
    expect(record).toMatchObject({ status: "running", ready: true });
    expect((await fetch(`${record.computerServerUrl}/status`)).status).toBe(200);
    expect((await service.api("DELETE", "/svc/pools/kill")).status).toBe(200);
    await vi.waitFor(async () => expect(await podsOf("kill")).toEqual([]), { timeout: 30_000 });
    const kept = await ns.core.readNamespacedConfigMap({ name: "hangar-pools", namespace: ns.name });
    expect(JSON.parse(kept.data?.["pools.json"] ?? "")).toEqual({ pools: [], members: [] });
  }, 180_000);
});
