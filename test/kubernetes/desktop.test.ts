/**
 * The project's real desktop image on the cluster: pushed into the cluster's registry from the
 * image store scripts/test-image.sh builds (how long that takes is printed), run as a Kubernetes
 * desktop with a key of its own, under the Pod's restrictions (Pod Security baseline: root with
 * only the capabilities to run the agent as the desktop user, read-only root, no token), and driven
 * through the record's address as an agent would: a screenshot, a click, commands out of the
 * server's reach.
 */
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { desktopCommand, expectControllerOutOfReach, pngSize } from "../host/desktop-client.js";
import type { TestHost } from "../host/support.js";
import { startKubernetesHost, type TestNamespace, tempRoot, testNamespace } from "./cluster.js";
import { pushDesktopImage } from "./global-setup.js";

let ns: TestNamespace;
let host: TestHost;
let image: string;
const temp = tempRoot("hangar-k8s-push-");

beforeAll(async () => {
  ns = await testNamespace("hangar-desk");
  const started = performance.now();
  image = await pushDesktopImage(ns.registry, temp.root);
  console.log(
    `pushed the desktop image to the cluster's registry in ${Math.round(performance.now() - started)} ms`,
  );
  host = await startKubernetesHost(ns, { desktopImage: image, desktopKeys: true });
}, 600_000);
afterAll(async () => {
  await host?.cleanup();
  await ns?.cleanup();
  temp.remove();
});

/** The status code of `GET /status` sent with these headers (node:http: fetch will not send another Host). */
function statusWith(url: string, headers: Record<string, string>): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const req = request(new URL("/status", url), { headers }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the project's desktop as a Pod", () => {
  it("answers a screenshot and a click through the record's address, with its own key", async () => {
    const created = await host.api("POST", "/svc/vms", {
      name: "real",
      os: "linux",
      cpu: 1,
      memory: "2GB",
      diskSize: "1GB",
      display: "1024x768",
    });
    expect(created.status).toBe(200);
    const started = performance.now();
    expect((await host.api("POST", "/svc/vms/real/run", {})).status).toBe(202);
    const desktop = await vi.waitFor(
      async () => {
        const r = (await host.api("GET", "/svc/vms/real")).body;
        if (r.status !== "running") throw new Error(`stopped: ${r.lastError}`);
        if (!r.ready) throw new Error(`not ready yet (${r.lastError ?? "starting"})`);
        return r;
      },
      { timeout: 420_000, interval: 250 },
    );
    console.log(
      `Pod created → ready (first run, image pulled by the node): ${Math.round(performance.now() - started)} ms`,
    );
    expect(desktop.apiKey).toMatch(/^[\w-]{32}$/);
    expect(desktop.computerServerUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);

    const shot = await desktopCommand(desktop, "screenshot", { format: "png" });
    expect(shot.result.success).toBe(true);
    expect(pngSize(shot.result.content.image_data)).toEqual({ width: 1024, height: 768 });
    expect((await desktopCommand(desktop, "left_click", { x: 40, y: 50 })).result.success).toBe(true);
    expect((await desktopCommand(desktop, "get_cursor_position")).result.content.position).toEqual({
      x: 40,
      y: 50,
    });
    // Without its key the computer server refuses.
    expect((await desktopCommand({ ...desktop, apiKey: undefined }, "screenshot")).status).toBe(401);
    // Through the relay as through a published port: a foreign Host or Origin is refused.
    expect(await statusWith(desktop.computerServerUrl, { host: "evil.example" })).toBe(403);
    expect(await statusWith(desktop.computerServerUrl, { origin: "http://evil.example" })).toBe(403);
    expect(await statusWith(desktop.computerServerUrl, {})).toBe(200);
    // The agent's commands run as the desktop user, out of the root server's reach, and write its home.
    await expectControllerOutOfReach(desktop);
    const home = await desktopCommand(desktop, "run_command", {
      command: "echo mine > ~/mine.txt && stat -c '%u %a' ~ ~/mine.txt /tmp && ls -ld /tmp | cut -c10",
    });
    expect(home.result.stdout).toBe("10001 755\n10001 644\n0 1777\nt\n");

    // The same desktop again, its image now on the node: create → ready.
    expect((await host.api("POST", "/svc/vms/real/stop", {})).status).toBe(200);
    const again = performance.now();
    expect((await host.api("POST", "/svc/vms/real/run", {})).status).toBe(202);
    await vi.waitFor(
      async () => {
        const r = (await host.api("GET", "/svc/vms/real")).body;
        if (!r.ready) throw new Error(`not ready yet (${r.status} ${r.lastError ?? ""})`);
      },
      { timeout: 180_000, interval: 100 },
    );
    console.log(`Pod created → ready (image on the node): ${Math.round(performance.now() - again)} ms`);
    expect((await host.api("DELETE", "/svc/vms/real")).status).toBe(200);
    await vi.waitFor(async () => expect(await ns.pods()).toEqual([]), { timeout: 30_000 });
  }, 900_000);
});
