/**
 * A Kubernetes desktop asleep on disk: its Pod deleted, its home kept on its claim, its record
 * `hibernated` (`hibernation: "disk"`) at the same relay address; a request to that address makes
 * a new Pod and is answered, and the file written in the home before is there. A desktop whose
 * home goes with its Pod cannot hibernate (409, nothing changed). The test cluster has no
 * provisioner: the test offers a hostPath PersistentVolume.
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
const temp = tempRoot("hangar-k8s-nap-");
let volume = "";

beforeAll(async () => {
  ns = await testNamespace("hangar-nap");
  host = await startKubernetesHost(ns);
  volume = await offerHomeVolume(ns, temp.root, "hangar-nap-home");
}, 60_000);
afterAll(async () => {
  await host?.cleanup();
  await ns?.cleanup();
  await ns?.core.deletePersistentVolume({ name: volume }).catch(() => undefined);
  temp.remove();
});

const sh = (pod: string, script: string) => podShell(ns, pod, script);
const record = async (name: string) => (await host.api("GET", `/svc/vms/${name}`)).body;

describe("a persistent desktop asleep", () => {
  it("loses its Pod, keeps its home and address, and wakes on a request to its relay", async () => {
    expect((await host.api("POST", "/svc/vms", lightDesktop("nap", { storage: "persistent" }))).status).toBe(
      200,
    );
    expect((await host.api("POST", "/svc/vms/nap/run", {})).status).toBe(202);
    const awake = (await host.api("GET", "/svc/vms/nap?wait=ready&timeout=60")).body;
    expect(awake.ready).toBe(true);
    await sh("hangar-nap", "echo kept-$((6*7)) > /home/hangar/note");

    const slept = await host.api("POST", "/svc/vms/nap/hibernate", {});
    expect(slept.status, slept.text).toBe(200);
    expect(slept.body).toMatchObject({
      status: "hibernated",
      hibernation: "disk",
      computerServerUrl: awake.computerServerUrl,
      pod: null,
    });
    await vi.waitFor(async () => expect(await ns.pods()).toEqual([]), { timeout: 30_000, interval: 200 });
    const secret = await ns.core.readNamespacedSecret({ name: "hangar-nap", namespace: ns.name });
    expect(secret.metadata?.annotations?.["hangar.dev/hibernated-at"]).toBe(slept.body.hibernatedAt);

    const res = await fetch(new URL("/status", awake.computerServerUrl), {
      signal: AbortSignal.timeout(90_000),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok", light: true });
    expect((await record("nap")).status).toBe("running");
    expect((await sh("hangar-nap", "cat /home/hangar/note")).trim()).toBe("kept-42");
    // The new Pod is made as the first was (the choice is in the desktop's Secret): the desktop
    // image's entry point as root, to run the agent as the desktop user.
    expect(secret.metadata?.annotations?.["hangar.dev/command-user"]).toBe("true");
    const woken = await ns.core.readNamespacedPod({ name: "hangar-nap", namespace: ns.name });
    expect(woken.spec?.securityContext).toMatchObject({ runAsUser: 0, runAsNonRoot: false });

    const again = await host.api("POST", "/svc/vms/nap/resume", {});
    expect(again.status).toBe(409);
    expect(again.body.message).toBe("Virtual machine already running: nap (nothing to resume)");
    expect((await host.api("DELETE", "/svc/vms/nap")).status).toBe(200);
  }, 180_000);

  it("a desktop whose home goes with its Pod cannot hibernate: 409, still running", async () => {
    expect((await host.api("POST", "/svc/vms", lightDesktop("brief"))).status).toBe(200);
    expect((await host.api("POST", "/svc/vms/brief/run", {})).status).toBe(202);
    const res = await host.api("POST", "/svc/vms/brief/hibernate", {});
    expect(res.status).toBe(409);
    expect(res.body.message).toMatch(/^Cannot hibernate brief: its home goes with its Pod/);
    expect((await record("brief")).status).toBe("running");
    const memory = await host.api("POST", "/svc/vms/brief/hibernate", { mode: "memory" });
    expect(memory.status).toBe(400);
    expect(memory.body.message).toBe("A kubernetes desktop hibernates with 'disk', not 'memory'");
    expect((await host.api("DELETE", "/svc/vms/brief")).status).toBe(200);
  }, 120_000);
});
