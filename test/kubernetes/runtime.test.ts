/**
 * The Kubernetes runtime on a real cluster (global-setup.ts), driven through the host service's
 * lume routes and looked at with the official client: a desktop's life (create, run, ready by the
 * Pod's readiness probe, its computer server reached through the record's address, logs, update,
 * clone, stop, delete), the Pod as a shared cluster wants it, two host services seeing the same
 * desktops, a Pod deleted from outside, and bad input refused with nothing made.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { TestHost } from "../host/support.js";
import { lightDesktop, startKubernetesHost, type TestNamespace, testNamespace } from "./cluster.js";

let ns: TestNamespace;
let host: TestHost;
let other: TestHost;

beforeAll(async () => {
  ns = await testNamespace("hangar-rt");
  host = await startKubernetesHost(ns);
  other = await startKubernetesHost(ns);
}, 60_000);
afterAll(async () => {
  await other?.cleanup();
  await host?.cleanup();
  await ns?.cleanup();
});

const record = async (name: string, h: TestHost = host) => (await h.api("GET", `/svc/vms/${name}`)).body;
const waitFor = <T>(check: () => Promise<T>, timeout = 60_000) =>
  vi.waitFor(check, { timeout, interval: 100 });
const readyRecord = (name: string, h: TestHost = host) =>
  waitFor(async () => {
    const r = await record(name, h);
    if (!r.ready) throw new Error(`${name} not ready: ${r.status} ${r.lastError ?? ""}`);
    return r;
  });

describe("a desktop's life through the lume routes", () => {
  it("creates a stopped desktop as a Secret, runs it as a Pod that becomes ready, reaches it, stops and deletes it", async () => {
    const created = await host.api("POST", "/svc/vms", lightDesktop("life"));
    expect(created.status).toBe(200);
    expect(created.body).toMatchObject({ name: "life", status: "stopped", runtime: "kubernetes" });
    expect(await record("life")).toMatchObject({
      name: "life",
      status: "stopped",
      runtime: "kubernetes",
      cpuCount: 1,
      memorySize: 128 * 1024 ** 2,
      display: "1024x768",
      locationName: "kubernetes",
      computerServerUrl: null,
      ready: false,
    });
    const secret = await ns.core.readNamespacedSecret({ name: "hangar-life", namespace: ns.name });
    expect(secret.metadata?.labels).toMatchObject({
      "hangar.dev/desktop": "life",
      "hangar.dev/part": "desktop",
    });
    expect(await ns.pods()).toEqual([]);

    expect((await host.api("POST", "/svc/vms/life/run", {})).status).toBe(202);
    const ready = await readyRecord("life");
    expect(ready).toMatchObject({
      status: "running",
      pod: "hangar-life",
      node: "127.0.0.1",
      lastError: null,
    });
    expect(ready.computerServerUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(ready.startMs).toBeGreaterThanOrEqual(0);
    // The record's address is a loopback relay through the API server to the Pod's computer server port.
    const status = await fetch(`${ready.computerServerUrl}/status`);
    expect(status.status).toBe(200);
    expect(await status.json()).toMatchObject({ status: "ok" });

    // What happened is told as Events on the desktop's Secret (kubectl describe secret hangar-life).
    await waitFor(async () => {
      const events = await ns.core.listNamespacedEvent({
        namespace: ns.name,
        fieldSelector: "involvedObject.name=hangar-life",
      });
      expect(events.items.map((e) => e.reason)).toEqual(expect.arrayContaining(["Created", "Started"]));
    });

    const logs = await host.api("GET", "/svc/vms/life/logs");
    expect(logs.status).toBe(200);
    expect(logs.text).toMatch(/light desktop life 1024x768/);

    expect((await host.api("POST", "/svc/vms/life/run", {})).body.message).toMatch(/already running: life/);
    const busy = await host.api("PATCH", "/svc/vms/life", { cpu: 2 });
    expect(busy.status).toBe(400);
    expect(busy.body.message).toMatch(/while it runs/);

    const stopped = await host.api("POST", "/svc/vms/life/stop", {});
    expect(stopped.status).toBe(200);
    expect(await record("life")).toMatchObject({ status: "stopped", computerServerUrl: null, ready: false });
    expect(await ns.pods()).toEqual([]);
    // The relay went with the Pod.
    await expect(fetch(`${ready.computerServerUrl}/status`)).rejects.toThrow();

    expect((await host.api("PATCH", "/svc/vms/life", { cpu: 2, memory: "256MB" })).status).toBe(200);
    expect(await record("life")).toMatchObject({ cpuCount: 2, memorySize: 256 * 1024 ** 2 });

    expect((await host.api("DELETE", "/svc/vms/life")).status).toBe(200);
    expect((await host.api("GET", "/svc/vms/life")).status).toBe(400);
    await expect(ns.core.readNamespacedSecret({ name: "hangar-life", namespace: ns.name })).rejects.toThrow();
  }, 120_000);

  it("runs the Pod as a shared cluster wants it: Pod Security baseline, no token, read-only root, owned by its desktop", async () => {
    expect((await host.api("POST", "/svc/vms", lightDesktop("safe"))).status).toBe(200);
    expect((await host.api("POST", "/svc/vms/safe/run", {})).status).toBe(202);
    await readyRecord("safe");
    const pod = await ns.core.readNamespacedPod({ name: "hangar-safe", namespace: ns.name });
    const secret = await ns.core.readNamespacedSecret({ name: "hangar-safe", namespace: ns.name });
    expect(pod.spec?.automountServiceAccountToken).toBe(false);
    // The service's desktop image: its entry point starts as root with what it takes to run the
    // agent as the desktop user, nothing more; its secrets are root's alone (no file-system group).
    expect(pod.spec?.securityContext).toMatchObject({ runAsNonRoot: false, runAsUser: 0 });
    expect(pod.spec?.securityContext?.fsGroup).toBeUndefined();
    const container = pod.spec?.containers[0];
    expect(container?.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"], add: ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"] },
    });
    expect(pod.spec?.volumes?.find((v) => v.name === "secrets")?.secret?.defaultMode).toBe(0o400);
    expect(container?.readinessProbe?.httpGet?.path).toBe("/status");
    expect(container?.env?.map((e) => e.name)).not.toContain("HANGAR_API_KEYS");
    expect(pod.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: "Secret", name: "hangar-safe", uid: secret.metadata?.uid }),
    ]);
    // No token file in the Pod: the service account's token is not mounted.
    expect(pod.spec?.containers[0].volumeMounts?.some((m) => m.mountPath.includes("serviceaccount"))).toBe(
      false,
    );
    const policy = await ns.config
      .makeApiClient((await import("@kubernetes/client-node")).NetworkingV1Api)
      .readNamespacedNetworkPolicy({ name: "hangar-desktops", namespace: ns.name });
    expect(policy.spec?.podSelector?.matchLabels).toMatchObject({
      "app.kubernetes.io/name": "hangar-desktop",
    });
    expect((await host.api("DELETE", "/svc/vms/safe")).status).toBe(200);
    await waitFor(async () => expect(await ns.pods()).toEqual([]));
  }, 120_000);

  it("clones a desktop's spec under a new name, with keys of its own", async () => {
    expect((await host.api("POST", "/svc/vms", lightDesktop("orig", { display: "800x600" }))).status).toBe(
      200,
    );
    const cloned = await host.api("POST", "/svc/vms/clone", { name: "orig", newName: "copy" });
    expect(cloned.status).toBe(200);
    expect(await record("copy")).toMatchObject({ name: "copy", display: "800x600", status: "stopped" });
    const [a, b] = await Promise.all(
      ["orig", "copy"].map((n) => ns.core.readNamespacedSecret({ name: `hangar-${n}`, namespace: ns.name })),
    );
    expect(a.data?.["vnc-password"]).not.toEqual(b.data?.["vnc-password"]);
    const list = (await host.api("GET", "/svc/vms")).body.map((r: { name: string }) => r.name);
    expect(list).toEqual(expect.arrayContaining(["copy", "orig"]));
    for (const n of ["orig", "copy"]) expect((await host.api("DELETE", `/svc/vms/${n}`)).status).toBe(200);
  });

  it("refuses bad input with clear messages and makes nothing", async () => {
    const cases: [string, string, unknown, RegExp][] = [
      ["POST", "/svc/vms", lightDesktop("Upper"), /Invalid name for a Kubernetes desktop 'Upper'/],
      ["POST", "/svc/vms", lightDesktop("a".repeat(60)), /at most 50 characters/],
      ["POST", "/svc/vms", lightDesktop("img", { image: "bad;image" }), /';' is not allowed/],
      ["POST", "/svc/vms", lightDesktop("mac", { os: "macOS" }), /needs a macOS host/],
      ["POST", "/svc/vms", lightDesktop("where", { storage: "elsewhere" }), /two storage locations/],
      ["POST", "/svc/vms", lightDesktop("tiny", { memory: "1MB" }), /Invalid memory '1MB'/],
      ["POST", "/svc/vms/ghost/run", {}, /Virtual machine not found: ghost/],
      ["POST", "/svc/vms/ghost/stop", {}, /Virtual machine not found: ghost/],
      ["POST", "/svc/pull", { image: "debian:12", runtime: "kubernetes" }, /kubelet pulls the image/],
    ];
    for (const [method, path, body, message] of cases) {
      const res = await host.api(method, path, body);
      expect(res.status, `${method} ${path} ${JSON.stringify(body)}`).toBe(400);
      expect(res.body.message).toMatch(message);
      expect(res.text).not.toMatch(/ at .*\.ts:\d+/);
    }
    const secrets = await ns.core.listNamespacedSecret({
      namespace: ns.name,
      labelSelector: "hangar.dev/desktop",
    });
    expect(secrets.items).toEqual([]);
  });

  it("says why a Pod cannot start (an image that is not there) and stops waiting at once", async () => {
    expect(
      (await host.api("POST", "/svc/vms", lightDesktop("nope", { image: `${ns.registry}/no-such:image` })))
        .status,
    ).toBe(200);
    expect((await host.api("POST", "/svc/vms/nope/run", {})).status).toBe(202);
    const failed = await waitFor(async () => {
      const r = await record("nope");
      if (r.status !== "stopped") throw new Error(`still ${r.status}`);
      return r;
    });
    expect(failed.lastError).toMatch(/ErrImagePull|ImagePullBackOff/);
    expect((await host.api("DELETE", "/svc/vms/nope")).status).toBe(200);
    await waitFor(async () => expect(await ns.pods()).toEqual([]));
  }, 90_000);
});

describe("the cluster is the record", () => {
  it("shows a desktop made by one host service to another, which can stop it; both see the change", async () => {
    expect((await host.api("POST", "/svc/vms", lightDesktop("shared"))).status).toBe(200);
    // The other service's watch sees the Secret without being asked to look.
    await waitFor(async () => expect((await record("shared", other)).status).toBe("stopped"));
    expect((await other.api("POST", "/svc/vms/shared/run", {})).status).toBe(202);
    const seen = await readyRecord("shared", host);
    expect(seen.status).toBe("running");
    // Each service relays on a loopback port of its own; both reach the same desktop.
    const theirs = await readyRecord("shared", other);
    expect(theirs.computerServerUrl).not.toEqual(seen.computerServerUrl);
    for (const r of [seen, theirs]) expect((await fetch(`${r.computerServerUrl}/status`)).status).toBe(200);
    // A second start from the first service is refused: one Pod per desktop, the API server says so.
    expect((await host.api("POST", "/svc/vms/shared/run", {})).body.message).toMatch(/already running/);
    expect((await host.api("POST", "/svc/vms/shared/stop", {})).status).toBe(200);
    await waitFor(async () => expect((await record("shared", other)).status).toBe("stopped"));
    expect((await other.api("DELETE", "/svc/vms/shared")).status).toBe(200);
    await waitFor(async () => expect((await host.api("GET", "/svc/vms/shared")).status).toBe(400));
  }, 120_000);

  it("addresses desktops at their Pod IPs for clients in the cluster (pod-ip)", async () => {
    const inCluster = await startKubernetesHost(ns, {
      kubernetes: { kubeconfig: ns.kubeconfig, namespace: ns.name, reach: "pod-ip" },
    });
    try {
      expect((await inCluster.api("POST", "/svc/vms", lightDesktop("direct"))).status).toBe(200);
      expect((await inCluster.api("POST", "/svc/vms/direct/run", {})).status).toBe(202);
      const ready = await readyRecord("direct", inCluster);
      const pod = await ns.core.readNamespacedPod({ name: "hangar-direct", namespace: ns.name });
      expect(ready.computerServerUrl).toBe(`http://${pod.status?.podIP}:8000`);
      // The test cluster's Pod bridge is on this machine: the Pod IP answers here.
      expect((await fetch(`${ready.computerServerUrl}/status`)).status).toBe(200);
      expect((await inCluster.api("DELETE", "/svc/vms/direct")).status).toBe(200);
    } finally {
      await inCluster.cleanup();
    }
  }, 90_000);

  it("notices a Pod deleted from outside (kubectl delete pod) and a restarted service finds its desktops again", async () => {
    expect((await host.api("POST", "/svc/vms", lightDesktop("victim"))).status).toBe(200);
    expect((await host.api("POST", "/svc/vms/victim/run", {})).status).toBe(202);
    await readyRecord("victim");
    await ns.core.deleteNamespacedPod({ name: "hangar-victim", namespace: ns.name, gracePeriodSeconds: 0 });
    await waitFor(async () =>
      expect(await record("victim")).toMatchObject({ status: "stopped", ready: false }),
    );

    expect((await host.api("POST", "/svc/vms/victim/run", {})).status).toBe(202);
    await readyRecord("victim");
    await host.restart();
    // Read back from the cluster: the spec, the running Pod, its readiness, a new relay.
    const again = await readyRecord("victim");
    expect(again).toMatchObject({ status: "running", cpuCount: 1, display: "1024x768" });
    expect((await fetch(`${again.computerServerUrl}/status`)).status).toBe(200);
    expect((await host.api("DELETE", "/svc/vms/victim")).status).toBe(200);
    await waitFor(async () => expect(await ns.pods()).toEqual([]));
  }, 120_000);
});
