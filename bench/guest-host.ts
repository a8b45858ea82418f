/**
 * What the guest benchmarks share: a host service of their own in a temporary directory, with the
 * full guest desktop (test/e2e/guest-image.ts's disk, `GUEST_DESKTOP`) created in it, and the
 * clean-up of all of it, QEMUs included.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { copySparse } from "../src/host/qemu/sparse-copy.js";
import { type RunningHostService, startHostService } from "../src/host/server.js";
import { GUEST_DESKTOP, type GuestImage } from "../test/e2e/guest-image.js";
import { hostApi } from "../test/e2e/host-api.js";
import { killQemusUnder } from "../test/host/support.js";

export interface GuestHost {
  /** The temporary directory: the service's configuration, and its VMs under `vms/`. */
  dir: string;
  /** A call of the host service's API; throws, with the answer, on a status of 300 or more. */
  svc(method: string, path: string, body?: unknown): Promise<any>;
  /** Creates desktop `name` with a sparse copy of `image` as its disk (not started). */
  createDesktop(name: string, image: GuestImage): Promise<void>;
  /** Stops the service, kills its QEMUs and removes the directory. */
  close(): Promise<void>;
}

export async function startGuestHost(prefix: string): Promise<GuestHost> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  let host: RunningHostService | undefined;
  const close = async () => {
    await host?.close();
    await killQemusUnder(dir);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    host = await startHostService({
      port: 0,
      configHome: join(dir, "config"),
      userHome: dir,
      defaultHomeDirectory: join(dir, "vms"),
    });
  } catch (err) {
    await close();
    throw err;
  }
  const url = host.url;
  const svc = async (method: string, path: string, body?: unknown) => {
    const answer = await hostApi(url, method, path, body);
    if (answer.status >= 300) {
      throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
    }
    return answer.body;
  };
  return {
    dir,
    svc,
    async createDesktop(name, image) {
      await svc("POST", "/svc/vms", { name, ...GUEST_DESKTOP });
      await copySparse(image.path, join(dir, "vms", name, "disk.img"));
    },
    close,
  };
}
