/**
 * Two host services on one namespace, their pools in the cluster (--pools-in-cluster): one holds
 * the Lease hangar-pools-leader and alone refills, so a pool of 2 stays at 2; claims through
 * either never hand out one desktop twice, and a desktop claimed through one is released through
 * the other; the leader killed with -9 while it starts a desktop is replaced by the other once the
 * Lease expires, which removes the half-started desktop and refills, leaving no orphan Pod.
 */
import { CoordinationV1Api, type V1Lease } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { HostLog } from "../../src/host/host-log.js";
import { connectCluster } from "../../src/host/kubernetes/cluster.js";
import { LeaderLease } from "../../src/host/kubernetes/leader-lease.js";
import { type ChildHost, startChildHost, type TestNamespace, tempRoot, testNamespace } from "./cluster.js";

const LEASE_SECONDS = 4;
let ns: TestNamespace;
let leases: CoordinationV1Api;
const roots = [tempRoot("hangar-k8s-leader-"), tempRoot("hangar-k8s-leader-")];
const services: ChildHost[] = [];

const start = (root: string) =>
  startChildHost(root, {
    defaultRuntime: "kubernetes",
    kubernetes: {
      kubeconfig: ns.kubeconfig,
      namespace: ns.name,
      poolsInCluster: true,
      leaseDurationSeconds: LEASE_SECONDS,
    },
    desktopImage: ns.lightImage,
    containerEngine: false,
    stopGraceMs: 0,
    pools: { checkIntervalMs: 500, syncIntervalMs: 300 },
  });

beforeAll(async () => {
  ns = await testNamespace("hangar-leader");
  leases = ns.config.makeApiClient(CoordinationV1Api);
  services.push(...(await Promise.all(roots.map((r) => start(r.root)))));
}, 60_000);
afterAll(async () => {
  for (const s of services)
    if (s.child.exitCode === null && s.child.signalCode === null) s.child.kill("SIGKILL");
  await ns?.cleanup();
  for (const r of roots) r.remove();
});

type Desktop = { name: string; state: string };
const pool = async (s: ChildHost, name: string) => (await s.api("GET", `/svc/pools/${name}`)).body;
const lease = (): Promise<V1Lease> =>
  leases.readNamespacedLease({ name: "hangar-pools-leader", namespace: ns.name });
/** The service whose process holds the Lease (its identity is host_pid_suffix). */
const leader = async (not?: ChildHost) =>
  vi.waitFor(
    async () => {
      const holder = (await lease()).spec?.holderIdentity ?? "";
      const found = services.find((s) => holder.split("_")[1] === String(s.child.pid));
      if (!found || found === not) throw new Error(`the Lease is held by ${holder || "nobody"}`);
      return found;
    },
    { timeout: 20_000, interval: 100 },
  );
const readyOn = (s: ChildHost, name: string, count: number) =>
  vi.waitFor(
    async () => {
      const p = await pool(s, name);
      if (p.ready !== count) throw new Error(`${p.ready} ready of ${count} (${p.lastError ?? "no error"})`);
      return p;
    },
    { timeout: 60_000, interval: 100 },
  );
const podsOf = async (prefix: string) => (await ns.pods()).filter((p) => p.startsWith(`hangar-${prefix}-`));
/** Waits until the leader has renewed the Lease `times` more times: both services had time to act. */
const renewals = async (times: number) => {
  let seen = (await lease()).metadata?.resourceVersion;
  for (let i = 0; i < times; i++) {
    await vi.waitFor(
      async () => {
        const now = (await lease()).metadata?.resourceVersion;
        if (now === seen) throw new Error("not renewed yet");
        seen = now;
      },
      { timeout: 20_000, interval: 100 },
    );
  }
};

describe("two host services sharing pools in the cluster", () => {
  it("one leads; a pool of 2 stays at 2 Pods, seen alike through both", async () => {
    const [a, b] = services;
    const created = await b.api("POST", "/svc/pools", {
      name: "pair",
      size: 2,
      template: ns.lightImage,
      memory: "128MB",
      diskSize: "256MB",
    });
    expect(created.status).toBe(201);
    await leader();
    const seenA = await readyOn(a, "pair", 2);
    const seenB = await readyOn(b, "pair", 2);
    // Three more renewals (each a third of the Lease) with both services syncing every 300 ms.
    await renewals(3);
    expect(await podsOf("pair")).toHaveLength(2);
    const names = (p: { desktops: Desktop[] }) => p.desktops.map((d) => d.name).sort();
    expect(names(seenA)).toEqual(names(seenB));
    expect((await podsOf("pair")).map((p) => p.slice("hangar-".length)).sort()).toEqual(names(seenA));
  }, 120_000);

  it("claims through both never hand out one desktop twice; a release through the other service works", async () => {
    const [a, b] = services;
    const claims = await Promise.all(
      [a, b, a, b].map((s, i) => s.api("POST", "/svc/pools/pair/claim", { owner: `c${i}`, timeout: 60 })),
    );
    for (const c of claims) expect(c.status, JSON.stringify(c.body)).toBe(200);
    const names = claims.map((c) => c.body.name as string);
    expect(new Set(names).size).toBe(4);
    // Each claimant sees its own desktop answer.
    for (const c of claims) expect((await fetch(`${c.body.computerServerUrl}/status`)).status).toBe(200);
    // The leader refills to 2 ready beside the 4 claimed, no more.
    await readyOn(a, "pair", 2);
    await renewals(2);
    expect(await podsOf("pair")).toHaveLength(6);
    // Released through the service that did not hand it out.
    for (const [i, c] of claims.entries()) {
      const other = i % 2 === 0 ? b : a;
      const res = await other.api("POST", `/svc/vms/${c.body.name}/release`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    await vi.waitFor(async () => expect(await podsOf("pair")).toHaveLength(2), { timeout: 30_000 });
    // Both services' views lose the released desktops (each reads the ConfigMap again every 300 ms).
    for (const s of services) {
      await vi.waitFor(
        async () => {
          const p = await pool(s, "pair");
          for (const n of names) expect(p.desktops.map((d: Desktop) => d.name)).not.toContain(n);
          expect(p.ready).toBe(2);
        },
        { timeout: 10_000, interval: 100 },
      );
    }
  }, 180_000);

  it("the leader killed with -9 while it starts a desktop: the other takes the Lease, cleans up, refills", async () => {
    const dead = await leader();
    const survivor = services.find((s) => s !== dead) as ChildHost;
    const claimed = (await survivor.api("POST", "/svc/pools/pair/claim", { owner: "keeper", wait: false }))
      .body;
    expect(claimed.name).toBeTruthy();
    // The leader starts a replacement: kill it in the middle.
    const starting = await vi.waitFor(
      async () => {
        const names = (await pool(dead, "pair")).desktops
          .filter((d: Desktop) => d.state === "starting")
          .map((d: Desktop) => d.name);
        if (names.length === 0) throw new Error("nothing starting");
        return names as string[];
      },
      { timeout: 20_000, interval: 10 },
    );
    dead.child.kill("SIGKILL");
    const killedAt = performance.now();
    await new Promise((resolve) => dead.child.once("exit", resolve));

    expect(await leader(dead)).toBe(survivor);
    const tookMs = performance.now() - killedAt;
    // Taken once the Lease, unrenewed, expired: its duration counted from when the survivor last
    // saw it renewed (up to one try, a third of it, after the renewal), and up to one try more.
    expect(tookMs).toBeLessThan(LEASE_SECONDS * 1000 * (5 / 3) + 1000);

    await vi.waitFor(
      async () => {
        const p = await pool(survivor, "pair");
        const names = p.desktops.map((d: Desktop) => d.name);
        for (const s of starting) if (names.includes(s)) throw new Error(`${s} still a member`);
      },
      { timeout: 30_000, interval: 100 },
    );
    const after = await readyOn(survivor, "pair", 2);
    expect(after.desktops.find((d: { name: string }) => d.name === claimed.name)).toMatchObject({
      state: "claimed",
      claimedBy: "keeper",
    });
    // No orphan: the Pods are exactly the pool's members (2 ready and the claimed one).
    await vi.waitFor(
      async () =>
        expect((await podsOf("pair")).sort()).toEqual(
          after.desktops.map((d: Desktop) => `hangar-${d.name}`).sort(),
        ),
      { timeout: 30_000, interval: 100 },
    );
    expect(after.desktops).toHaveLength(3);

    expect((await survivor.api("DELETE", "/svc/pools/pair")).status).toBe(200);
    await vi.waitFor(async () => expect(await podsOf("pair")).toEqual([]), { timeout: 30_000 });
    const kept = await ns.core.readNamespacedConfigMap({ name: "hangar-pools", namespace: ns.name });
    expect(JSON.parse(kept.data?.["pools.json"] ?? "")).toEqual({ pools: [], members: [] });
  }, 180_000);
});

describe("the leader Lease", () => {
  it("a leader that stops cleanly gives it up: another takes it at its next try, long before it would expire", async () => {
    const cluster = connectCluster({ kubeconfig: ns.kubeconfig, namespace: ns.name });
    const log = new HostLog(async () => roots[0].root);
    const events: string[] = [];
    const elector = (id: string) =>
      new LeaderLease(
        cluster,
        { lead: () => events.push(`${id} leads`), follow: () => events.push(`${id} follows`) },
        log,
        { name: "handover", durationSeconds: 12, identity: id },
      );
    const a = elector("a");
    const b = elector("b");
    await a.start();
    await b.start();
    expect(events).toEqual(["a leads"]);
    await a.close();
    expect(events).toEqual(["a leads", "a follows"]);
    const given = await leases.readNamespacedLease({ name: "handover", namespace: ns.name });
    expect(given.spec?.holderIdentity).toBeFalsy();
    // b tries every 4 s; the Lease, had it not been given up, would be a's for 12 s.
    await vi.waitFor(() => expect(b.isLeader).toBe(true), { timeout: 8_000, interval: 50 });
    expect(events).toEqual(["a leads", "a follows", "b leads"]);
    await b.close();
  }, 30_000);
});
