/**
 * E2B's SDK (unmodified) against a host service whose sandboxes are Pods of the project's desktop
 * image on the test cluster: create, a port of the sandbox reached by its per-port name (through
 * the Pod's relay and its computer server's tunnel), a command through envd, a list by metadata, kill.
 */
import { Sandbox, SandboxNotFoundError } from "e2b";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { E2B_KEY, sdkOptions, viaLoopback } from "../host/e2b-support.js";
import type { TestHost } from "../host/support.js";
import { startKubernetesHost, type TestNamespace, tempRoot, testNamespace } from "./cluster.js";
import { pushDesktopImage } from "./global-setup.js";

let ns: TestNamespace;
let host: TestHost;
const temp = tempRoot("hangar-k8s-e2b-");

beforeAll(async () => {
  ns = await testNamespace("hangar-e2b");
  const image = await pushDesktopImage(ns.registry, temp.root);
  host = await startKubernetesHost(ns, {
    desktopImage: image,
    desktopKeys: true,
    e2b: { port: 0, env: { HANGAR_E2B_API_KEYS: E2B_KEY } },
  });
}, 600_000);
afterAll(async () => {
  await host?.cleanup();
  await ns?.cleanup();
  temp.remove();
});

describe("E2B sandboxes as Pods", () => {
  it("creates a sandbox as a Pod, reaches its computer server by its per-port name, and kills it", async () => {
    const options = sdkOptions(host.service.e2b?.url ?? "");
    const sandbox = await Sandbox.create("base", {
      ...options,
      timeoutMs: 600_000,
      metadata: { on: "kubernetes" },
    });
    const desktop = `e2b-${sandbox.sandboxId}`;
    expect(await ns.pods()).toContain(`hangar-${desktop}`);
    const vm = (await host.api("GET", `/svc/vms/${desktop}`)).body;
    expect(vm).toMatchObject({ runtime: "kubernetes", ready: true });

    const status = await viaLoopback(sandbox.getHost(8000), "GET", "/status", {
      "e2b-traffic-access-token": sandbox.trafficAccessToken as string,
    });
    expect(status.status).toBe(200);
    expect(JSON.parse(status.body)).toMatchObject({
      status: "ok",
      features: expect.arrayContaining(["tunnel"]),
    });
    // envd in the Pod, on its loopback, through the relay and the tunnel.
    const ran = await sandbox.commands.run('echo "on $(hostname)"');
    expect(ran.stdout).toBe(`on ${desktop}\n`);
    const listed = await Sandbox.list({ ...options, query: { metadata: { on: "kubernetes" } } }).nextItems();
    expect(listed.map((s) => s.sandboxId)).toEqual([sandbox.sandboxId]);

    await sandbox.kill();
    await expect.poll(() => ns.pods(), { timeout: 60_000 }).not.toContain(`hangar-${desktop}`);
    await expect(Sandbox.getInfo(sandbox.sandboxId, options)).rejects.toThrow(SandboxNotFoundError);
  }, 600_000);
});
