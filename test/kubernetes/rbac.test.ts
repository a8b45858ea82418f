/**
 * The host service with a service account's rights only, as deploy/kubernetes/host/role.yaml gives
 * them: that Role is enough for a desktop's whole life (relay and logs included), and narrower
 * ones give clear answers naming what is missing (and the Role file), never a crash or a stack.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  CoordinationV1Api,
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  loadAllYaml,
  type V1Role,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { TestHost } from "../host/support.js";
import { lightDesktop, startKubernetesHost, type TestNamespace, tempRoot, testNamespace } from "./cluster.js";

const ROLE_FILE = join(import.meta.dirname, "..", "..", "deploy", "kubernetes", "host", "role.yaml");
let ns: TestNamespace;
const temp = tempRoot("hangar-k8s-rbac-");
const hosts: TestHost[] = [];

beforeAll(async () => {
  ns = await testNamespace("hangar-rbac");
}, 60_000);
afterAll(async () => {
  for (const h of hosts) await h.cleanup();
  await ns?.cleanup();
  temp.remove();
});

/**
 * Applies the project's Role file in the namespace under `name`, with `narrow` taking rules out;
 * returns a kubeconfig that authenticates as its service account (a token from the TokenRequest API).
 */
async function serviceAccount(name: string, narrow: (role: V1Role) => V1Role = (r) => r): Promise<string> {
  const objects = loadAllYaml(readFileSync(ROLE_FILE, "utf8")) as KubernetesObject[];
  const client = KubernetesObjectApi.makeApiClient(ns.config);
  for (const object of objects) {
    let body = structuredClone(object) as KubernetesObject & Record<string, any>;
    body.metadata = { ...body.metadata, name, namespace: ns.name };
    if (body.kind === "Role") body = narrow(body as V1Role) as typeof body;
    if (body.kind === "RoleBinding") {
      body.roleRef.name = name;
      body.subjects = [{ kind: "ServiceAccount", name, namespace: ns.name }];
    }
    await client.create(body);
  }
  const token = await vi.waitFor(
    async () =>
      (
        await ns.core.createNamespacedServiceAccountToken({
          name,
          namespace: ns.name,
          body: { spec: { audiences: [], expirationSeconds: 3600 } },
        })
      ).status?.token,
    { timeout: 20_000, interval: 200 },
  );
  const admin = ns.config.getCurrentCluster();
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [admin],
    users: [{ name, token }],
    contexts: [{ name, cluster: admin?.name, user: name, namespace: ns.name }],
    currentContext: name,
  });
  const file = join(temp.root, `${name}.kubeconfig`);
  writeFileSync(file, config.exportConfig(), { mode: 0o600 });
  return file;
}

async function hostAs(kubeconfig: string): Promise<TestHost> {
  const host = await startKubernetesHost(ns, { kubernetes: { kubeconfig } });
  hosts.push(host);
  return host;
}

const without = (resource: string, verb?: string) => (role: V1Role) => ({
  ...role,
  rules: (role.rules ?? [])
    .map((rule) =>
      rule.resources?.includes(resource)
        ? { ...rule, verbs: verb ? rule.verbs.filter((v) => v !== verb) : [] }
        : rule,
    )
    .filter((rule) => rule.verbs.length > 0),
});

describe("deploy/kubernetes/host", () => {
  it("is accepted by the API server as it is (a server-side dry run of every object)", async () => {
    const dir = join(import.meta.dirname, "..", "..", "deploy", "kubernetes", "host");
    const client = KubernetesObjectApi.makeApiClient(ns.config);
    const kinds: string[] = [];
    for (const file of ["role.yaml", "deployment.yaml", "pool-job.yaml"]) {
      for (const object of loadAllYaml(readFileSync(join(dir, file), "utf8")) as KubernetesObject[]) {
        const body = { ...object, metadata: { ...object.metadata, namespace: ns.name } };
        await client.create(body, undefined, "All");
        kinds.push(`${object.kind}/${object.metadata?.name}`);
      }
    }
    expect(kinds).toEqual([
      "ServiceAccount/hangar-host",
      "Role/hangar-host",
      "RoleBinding/hangar-host",
      "Deployment/hangar-host",
      "Service/hangar-host",
      "Job/hangar-sample-pool",
    ]);
    // A dry run makes nothing.
    expect(
      (await ns.core.listNamespacedServiceAccount({ namespace: ns.name })).items.map((a) => a.metadata?.name),
    ).not.toContain("hangar-host");
  });
});

describe("the host service's Role", () => {
  it("is enough for a desktop's whole life: create, run, ready, relay, logs, stop, delete", async () => {
    const host = await hostAs(await serviceAccount("hangar-full"));
    expect((await host.api("POST", "/svc/vms", lightDesktop("ok"))).status).toBe(200);
    expect((await host.api("POST", "/svc/vms/ok/run", {})).status).toBe(202);
    const ready = await vi.waitFor(
      async () => {
        const r = (await host.api("GET", "/svc/vms/ok")).body;
        if (!r.ready) throw new Error(`not ready: ${r.status} ${r.lastError ?? ""}`);
        return r;
      },
      { timeout: 60_000, interval: 100 },
    );
    expect((await fetch(`${ready.computerServerUrl}/status`)).status).toBe(200);
    expect((await host.api("GET", "/svc/vms/ok/logs")).text).toMatch(/light desktop ok/);
    expect((await host.api("POST", "/svc/vms/ok/stop", {})).status).toBe(200);
    expect((await host.api("DELETE", "/svc/vms/ok")).status).toBe(200);
    expect(await ns.pods()).toEqual([]);
  }, 120_000);

  it("is enough for pools kept in the cluster: the Lease taken, the ConfigMap written, a pool filled", async () => {
    const kubeconfig = await serviceAccount("hangar-pools");
    const host = await startKubernetesHost(ns, {
      kubernetes: { kubeconfig, namespace: ns.name, poolsInCluster: true, leaseDurationSeconds: 3 },
    });
    hosts.push(host);
    const created = await host.api("POST", "/svc/pools", {
      name: "rbac",
      size: 1,
      template: ns.lightImage,
      memory: "128MB",
      diskSize: "256MB",
    });
    expect(created.status).toBe(201);
    await vi.waitFor(
      async () => {
        const p = (await host.api("GET", "/svc/pools/rbac")).body;
        if (p.ready !== 1) throw new Error(`${p.ready} ready (${p.lastError ?? "no error"})`);
      },
      { timeout: 60_000, interval: 100 },
    );
    const lease = await ns.config
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ name: "hangar-pools-leader", namespace: ns.name });
    expect(lease.spec?.holderIdentity).toMatch(new RegExp(`_${process.pid}_`));
    expect((await host.api("DELETE", "/svc/pools/rbac")).status).toBe(200);
    await vi.waitFor(async () => expect(await ns.pods()).toEqual([]), { timeout: 30_000 });
  }, 120_000);

  it("without 'create pods': run answers which permission is missing, and the desktop stays stopped", async () => {
    const host = await hostAs(await serviceAccount("hangar-nocreate", without("pods", "create")));
    expect((await host.api("POST", "/svc/vms", lightDesktop("blocked"))).status).toBe(200);
    const res = await host.api("POST", "/svc/vms/blocked/run", {});
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(
      /Kubernetes forbids creating the Pod of desktop blocked in namespace hangar-rbac-\w+: .*cannot create resource "pods".*deploy\/kubernetes\/host\/role\.yaml/,
    );
    expect(res.text).not.toMatch(/ at .*\.[jt]s:\d+/);
    expect((await host.api("GET", "/svc/vms/blocked")).body).toMatchObject({ status: "stopped" });
    expect((await host.api("DELETE", "/svc/vms/blocked")).status).toBe(200);
  }, 60_000);

  it("without 'list secrets': every Kubernetes request says the desktops cannot be read, and why", async () => {
    const host = await hostAs(await serviceAccount("hangar-nolist", without("secrets", "list")));
    const res = await host.api("POST", "/svc/vms", lightDesktop("unseen"));
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(
      /Kubernetes desktops are unavailable: Kubernetes forbids listing and watching desktops \(Secrets\) in namespace hangar-rbac-\w+: .*cannot list resource "secrets"/,
    );
    expect((await host.api("GET", "/svc/vms/unseen")).body.message).toMatch(
      /Kubernetes desktops are unavailable/,
    );
    // The service itself runs on (its other runtimes, its page).
    expect((await host.api("GET", "/svc/vms")).status).toBe(200);
    const secrets = await ns.core.listNamespacedSecret({
      namespace: ns.name,
      labelSelector: "hangar.dev/desktop",
    });
    expect(secrets.items).toEqual([]);
  }, 60_000);
});
