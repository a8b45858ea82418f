/**
 * E2B's network options on Hangar's egress policies, with E2B's SDK (unmodified) against the host
 * service's E2B listener, real podman desktops, and a world network namespace of the test's own
 * (world.ts) as the only "internet": a sandbox created with all traffic denied but one name reaches
 * that name and nothing else, `updateNetwork` changes that while it runs, and `getInfo` says what
 * was asked. The desktop's own programs try the names, as an agent's would.
 */
import { Sandbox } from "e2b";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { E2B_KEY, sdkOptions } from "../host/e2b-support.js";
import { startPodman, TEST_IMAGE, type TestEngine, testUlimits } from "../host/podman.js";
import { startTestHost, type TestHost } from "../host/support.js";
import { stopCagedHost } from "./caged-host.js";
import { inDesktop } from "./desktop-probe.js";
import { startWorld, type World } from "./world.js";

let world: World;
let engine: TestEngine;
let host: TestHost;

beforeAll(async () => {
  world = await startWorld(["allowed.example.test", "other.example.test"]);
  engine = await startPodman();
  host = await startTestHost({
    containerEngine: engine.address,
    desktopImage: TEST_IMAGE,
    containerUlimits: testUlimits(),
    defaultRuntime: "container",
    egressResolvers: [world.dns],
    egressTrust: [world.caPem],
    e2b: { port: 0, env: { HANGAR_E2B_API_KEYS: E2B_KEY } },
  });
}, 300_000);
afterAll(() => stopCagedHost({ world, engine, host }, []));

const reach = (desktop: { name: string; computerServerUrl: string; apiKey?: string }) =>
  inDesktop(
    desktop,
    `return {
      allowed: await byName("https://allowed.example.test/hello"),
      other: await byName("https://other.example.test/hello"),
    };`,
  );

describe("E2B's network options", () => {
  it("deny all traffic but what allowOut lists, and change while the sandbox runs", async () => {
    const options = sdkOptions(host.service.e2b?.url ?? "");
    const sandbox = await Sandbox.create("base", {
      ...options,
      timeoutMs: 600_000,
      network: { denyOut: ({ allTraffic }) => [allTraffic], allowOut: ["allowed.example.test"] },
    });
    try {
      const vm = (await host.api("GET", `/svc/vms/e2b-${sandbox.sandboxId}`)).body;
      expect(vm.network).toMatchObject({ egress: { allow: ["allowed.example.test"] }, caged: true });
      const info = await sandbox.getInfo();
      expect(info.network).toMatchObject({ allowOut: ["allowed.example.test"], denyOut: ["0.0.0.0/0"] });

      const first = await reach(vm);
      expect(first.allowed).toMatchObject({ status: 200 });
      expect(first.other.status).toBeUndefined();

      // Replaced while it runs: now the other name only.
      await sandbox.updateNetwork({
        denyOut: ({ allTraffic }) => [allTraffic],
        allowOut: ["other.example.test"],
      });
      expect((await host.api("GET", `/svc/vms/${vm.name}`)).body.network).toMatchObject({
        egress: { allow: ["other.example.test"] },
      });
      const second = await reach(vm);
      expect(second.other).toMatchObject({ status: 200 });
      expect(second.allowed.status).toBeUndefined();
      expect((await sandbox.getInfo()).network).toMatchObject({ allowOut: ["other.example.test"] });
    } finally {
      await sandbox.kill();
    }
  }, 300_000);

  it("an open sandbox (no egress options) has no cage to change: updateNetwork says so", async () => {
    const options = sdkOptions(host.service.e2b?.url ?? "");
    const sandbox = await Sandbox.create("base", { ...options, timeoutMs: 600_000 });
    try {
      const refused = await sandbox
        .updateNetwork({ denyOut: ({ allTraffic }) => [allTraffic] })
        .catch((err: Error) => err);
      expect(String(refused)).toMatch(/was made without a network policy/);
    } finally {
      await sandbox.kill();
    }
  }, 300_000);
});
