/**
 * End to end: the host service creates a VM from the guest image, runs it under QEMU (TCG when
 * there is no KVM), the computer server inside answers on the VM's `ipAddress:8000`, takes a
 * screenshot of the guest's desktop and runs a command in the guest, and the VM stops.
 *
 * Slow (minutes): only `npm run test:e2e` runs it.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { copySparse } from "../../src/host/qemu/sparse-copy.js";
import { type RunningHostService, startHostService } from "../../src/host/server.js";
import { postCmd } from "../support/server.js";
import { hostApi, timedInto } from "./host-api.js";

const VM = "e2e-guest";
// The VM's display, which the guest's virtual desktop takes (not the image's default 1280x800).
const DISPLAY = { width: 1024, height: 768 };
const timings: Record<string, number> = {};

let dir: string;
let host: RunningHostService;
let image: string;

const svc = (method: string, path: string, body?: unknown) => hostApi(host.url, method, path, body);

const timed = <T>(name: string, work: () => Promise<T>) => timedInto(timings, name, work);

/** Polls until `check` returns a value, or fails with the last reason after `timeoutMs`. */
async function waitFor<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(1000);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last: ${last})` : ""}`);
}

beforeAll(async () => {
  const built = inject("guestImage");
  image = built.path;
  if (built.builtInMs !== null) timings["image build"] = built.builtInMs;
  dir = await mkdtemp(join(tmpdir(), "hangar-e2e-"));
  host = await startHostService({
    port: 0,
    configHome: join(dir, "config"),
    userHome: dir,
    defaultHomeDirectory: join(dir, "vms"),
  });
}, 20 * 60_000);

afterAll(async () => {
  if (host) {
    const vm = await svc("GET", `/svc/vms/${VM}`);
    if (vm.body?.status === "running") await svc("POST", `/svc/vms/${VM}/stop`);
    await svc("DELETE", `/svc/vms/${VM}`);
    await host.close();
  }
  if (dir) await rm(dir, { recursive: true, force: true });
  console.log(
    `guest e2e timings (ms): ${Object.entries(timings)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`,
  );
}, 120_000);

describe("a guest VM built from Debian packages, run by the host service", () => {
  it(
    "boots, serves /status on ipAddress:8000, takes a screenshot, runs a command, and stops",
    async () => {
      const created = await svc("POST", "/svc/vms", {
        name: VM,
        os: "linux",
        cpu: 2,
        memory: "2GB",
        diskSize: "8GB",
        display: `${DISPLAY.width}x${DISPLAY.height}`,
      });
      expect(created.status, JSON.stringify(created.body)).toBeLessThan(300);
      // The new VM's blank disk is replaced with the built guest disk (sparse copy).
      await copySparse(image, join(dir, "vms", VM, "disk.img"));

      const run = await svc("POST", `/svc/vms/${VM}/run`, { noDisplay: true });
      expect(run.status, JSON.stringify(run.body)).toBe(202);

      const url = await timed("run → ipAddress", () =>
        waitFor("the VM's address", 60_000, async () => {
          const vm = await svc("GET", `/svc/vms/${VM}`);
          if (vm.body?.lastError) throw new Error(vm.body.lastError);
          return vm.body?.computerServerUrl ?? undefined;
        }),
      );
      const vm = (await svc("GET", `/svc/vms/${VM}`)).body;
      expect(url).toBe(`http://${vm.ipAddress}:8000`);
      expect(vm.ipAddress).toMatch(/^127\.0\.1\.\d+$/);

      const status = await timed("run → /status answers", () =>
        waitFor("the guest's computer server", 8 * 60_000, async () => {
          const res = await fetch(`${url}/status`, { signal: AbortSignal.timeout(5000) });
          return res.ok ? ((await res.json()) as Record<string, unknown>) : undefined;
        }),
      ).catch(async (err: Error) => {
        // The guest's console (kernel and systemd) says why it never answered.
        const serial = await readFile(join(dir, "vms", VM, "serial.log"), "latin1").catch(() => "");
        throw new Error(`${err.message}\nguest console (end):\n${serial.slice(-3000)}`);
      });
      expect(status).toMatchObject({ status: "ok", os_type: "linux" });

      // The guest's desktop is ready a moment after the server answers: retry the first screenshot.
      const shot = await timed("screenshot", () =>
        waitFor("a screenshot of the guest's desktop", 60_000, async () => {
          const reply = await postCmd(url, { command: "screenshot", params: { format: "png" } });
          return reply.event?.success ? reply.event : undefined;
        }),
      );
      const png = Buffer.from(shot.content.image_data, "base64");
      const meta = await sharp(png).metadata();
      expect(meta.format).toBe("png");
      expect([meta.width, meta.height]).toEqual([DISPLAY.width, DISPLAY.height]);

      const uname = await timed("run_command", () =>
        postCmd(url, { command: "run_command", params: { command: "hostname; id -un; uname -s" } }),
      );
      expect(uname.event).toMatchObject({ success: true, return_code: 0 });
      expect(uname.event.stdout.trim().split("\n")).toEqual(["hangar-guest", "hangar", "Linux"]);

      const stop = await timed("stop", () => svc("POST", `/svc/vms/${VM}/stop`));
      expect(stop.status, JSON.stringify(stop.body)).toBe(200);
      expect((await svc("GET", `/svc/vms/${VM}`)).body.status).toBe("stopped");
      await expect(fetch(`${url}/status`, { signal: AbortSignal.timeout(3000) })).rejects.toThrow();
    },
    15 * 60_000,
  );
});
