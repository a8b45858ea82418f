/**
 * What the container egress tests share: a world (world.ts), a podman engine (test/host/podman.ts)
 * and a host service whose proxy resolves with the world's DNS and trusts its CA; a desktop made,
 * started and waited for; and all of it taken down again, the desktops first (their networks,
 * bridges and filter rules go with them).
 */
import { expect } from "vitest";
import { startPodman, TEST_IMAGE, type TestEngine, testUlimits } from "../host/podman.js";
import { startTestHost, type TestHost } from "../host/support.js";
import { startWorld, type World } from "./world.js";

export interface CagedHost {
  world: World;
  engine: TestEngine;
  host: TestHost;
}

/** A container desktop of the project's image, 1 GB, as the tests make them. */
export const CONTAINER_DESKTOP = {
  os: "linux",
  cpu: 1,
  memory: "1GB",
  diskSize: "2GB",
  display: "1024x768",
  runtime: "container",
};

export async function startCagedHost(
  names: string[],
  fixed: Record<string, string> = {},
): Promise<CagedHost> {
  const world = await startWorld(names, fixed);
  const engine = await startPodman();
  const host = await startTestHost({
    containerEngine: engine.address,
    desktopImage: TEST_IMAGE,
    containerUlimits: testUlimits(),
    egressResolvers: [world.dns],
    egressTrust: [world.caPem],
  });
  return { world, engine, host };
}

/** Makes a container desktop with `network`, runs it and gives its record once it is ready. */
export async function startDesktop(host: TestHost, name: string, network: unknown) {
  const created = await host.api("POST", "/svc/vms", { name, ...CONTAINER_DESKTOP, network });
  expect(created.status, created.text).toBe(200);
  expect((await host.api("POST", `/svc/vms/${name}/run`, {})).status).toBe(202);
  const ready = await host.api("GET", `/svc/vms/${name}?wait=ready&timeout=240`);
  expect(ready.status, ready.text).toBe(200);
  return ready.body as { name: string; computerServerUrl: string; apiKey?: string };
}

/**
 * Deletes the pools and the desktops (`desktops` first, then any other a failed test left), then
 * stops the service, the engine and the world.
 */
export async function stopCagedHost(caged: Partial<CagedHost>, desktops: string[]) {
  const host = caged.host;
  const pools = ((await host?.api("GET", "/svc/pools").catch(() => undefined))?.body ?? []) as {
    name: string;
  }[];
  for (const pool of pools) await host?.api("DELETE", `/svc/pools/${pool.name}`).catch(() => undefined);
  const left = ((await host?.api("GET", "/svc/vms").catch(() => undefined))?.body ?? []) as {
    name: string;
  }[];
  for (const name of new Set([...desktops, ...left.map((vm) => vm.name)])) {
    await host?.api("DELETE", `/svc/vms/${name}`).catch(() => undefined);
  }
  await caged.host?.cleanup();
  await caged.engine?.cleanup();
  await caged.world?.cleanup();
}
