/**
 * A desktop whose home outlives its Pod (`storage: "persistent"`): a PersistentVolumeClaim made
 * with it, kept across stop and run (a file written in one Pod is read in the next), deleted with
 * it. The test cluster has no provisioner: the test offers a hostPath PersistentVolume.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { TestHost } from "../host/support.js";
import {
  lightDesktop,
  offerHomeVolume,
  podShell,
  startKubernetesHost,
  type TestNamespace,
  tempRoot,
  testNamespace,
} from "./cluster.js";

let ns: TestNamespace;
let host: TestHost;
const temp = tempRoot("hangar-k8s-pv-");
let volume = "";

beforeAll(async () => {
  ns = await testNamespace("hangar-pv");
  host = await startKubernetesHost(ns);
  volume = await offerHomeVolume(ns, temp.root, "hangar-keep-home");
}, 60_000);
afterAll(async () => {
  await host?.cleanup();
  await ns?.cleanup();
  await ns?.core.deletePersistentVolume({ name: volume }).catch(() => undefined);
  temp.remove();
});

const sh = (pod: string, script: string) => podShell(ns, pod, script);

const ready = (name: string) =>
  vi.waitFor(
    async () => {
      const r = (await host.api("GET", `/svc/vms/${name}`)).body;
      if (!r.ready) throw new Error(`not ready: ${r.status} ${r.lastError ?? ""}`);
      return r;
    },
    { timeout: 60_000, interval: 100 },
  );

describe("a persistent desktop", () => {
  it("keeps its home across stop and run, and loses it with the desktop", async () => {
    const created = await host.api("POST", "/svc/vms", lightDesktop("keep", { storage: "persistent" }));
    expect(created.status).toBe(200);
    expect((await host.api("GET", "/svc/vms/keep")).body).toMatchObject({ locationName: "persistent" });
    const claim = await ns.core.readNamespacedPersistentVolumeClaim({
      name: "hangar-keep-home",
      namespace: ns.name,
    });
    expect(claim.metadata?.ownerReferences?.[0]).toMatchObject({ kind: "Secret", name: "hangar-keep" });

    expect((await host.api("POST", "/svc/vms/keep/run", {})).status).toBe(202);
    await ready("keep");
    await sh("hangar-keep", "echo kept-$((6*7)) > /home/hangar/note");
    expect((await host.api("POST", "/svc/vms/keep/stop", {})).status).toBe(200);
    // The claim stays while the desktop is stopped.
    await ns.core.readNamespacedPersistentVolumeClaim({ name: "hangar-keep-home", namespace: ns.name });

    expect((await host.api("POST", "/svc/vms/keep/run", {})).status).toBe(202);
    await ready("keep");
    expect((await sh("hangar-keep", "cat /home/hangar/note")).trim()).toBe("kept-42");
    const clone = await host.api("POST", "/svc/vms/clone", { name: "keep", newName: "copy" });
    expect(clone.status).toBe(400);
    expect(clone.body.message).toMatch(/VolumeSnapshot/);

    expect((await host.api("DELETE", "/svc/vms/keep")).status).toBe(200);
    await vi.waitFor(
      async () =>
        expect(
          (await ns.core.listNamespacedPersistentVolumeClaim({ namespace: ns.name })).items.map(
            (c) => c.metadata?.name,
          ),
        ).toEqual([]),
      { timeout: 30_000, interval: 200 },
    );
    expect(await ns.pods()).toEqual([]);
  }, 120_000);
});
