/**
 * A container desktop starts with its CPU limit lifted, and gets it back once it is ready (its
 * computer server answered), when it stops, or after `maxMs` at the latest.
 *
 * Its start is bound by CPU: Node's start and module graph, the X server, the window manager, the
 * panel and the sound server share the desktop's limit (one CPU for `cpu: 1`) for about half a
 * second. With both of this machine's cores, `run` → screenshot took 590–710 ms against 740–870 ms
 * under the limit (docs/performance.md).
 *
 * The lift is podman's live update of the container's cgroup (`POST /libpod/containers/{id}/update`),
 * which the container's configuration does not keep: the limit asked for stays the container's own,
 * and `restoreAll` (the runtime's recovery at start) puts back the limit of a desktop that a killed
 * service left lifted. An engine without that call (Docker's) starts its desktops under their limit.
 */
import type Dockerode from "dockerode";
import type { HostLog } from "../host-log.js";
import { engineMessage, statusOf } from "./engine.js";

/** The CFS period the quota is given in (the kernel's default). */
const PERIOD_US = 100_000;
/** The longest a desktop runs without its limit when it is never seen ready. */
export const BOOST_MAX_MS = 10_000;

export class StartBoost {
  /** Lifted desktops: their container and the timer that ends the lift. */
  private readonly lifted = new Map<string, { id: string; nanoCpus: number; timer: NodeJS.Timeout }>();
  /** False once the engine answered that it has no live update (not podman). */
  private available = true;

  constructor(
    private readonly docker: Dockerode,
    private readonly log: HostLog,
    private readonly maxMs = BOOST_MAX_MS,
  ) {}

  /** Lifts the CPU limit of desktop `name`'s container `id` (its own limit: `nanoCpus`), just started. */
  async lift(name: string, id: string, nanoCpus: number): Promise<void> {
    if (!this.available || nanoCpus <= 0) return;
    this.end(name);
    if ((await this.setQuota(id, -1)) !== "done") return;
    const timer = setTimeout(() => void this.restore(name), this.maxMs);
    timer.unref();
    this.lifted.set(name, { id, nanoCpus, timer });
  }

  /** Gives desktop `name` its limit back (ready, or the longest lift over); nothing when it is not lifted. */
  async restore(name: string): Promise<void> {
    const lift = this.lifted.get(name);
    if (!lift) return;
    this.end(name);
    const outcome = await this.setQuota(lift.id, quotaOf(lift.nanoCpus));
    if (outcome !== "done" && outcome !== "gone") {
      await this.log.error("A container desktop's CPU limit could not be put back after its start", {
        vm: name,
        error: outcome.failed,
      });
    }
  }

  /** Forgets desktop `name`'s lift (it stopped: its next start applies the limit of its configuration). */
  end(name: string) {
    const lift = this.lifted.get(name);
    if (!lift) return;
    clearTimeout(lift.timer);
    this.lifted.delete(name);
  }

  /** Puts back every running desktop's own limit (what a killed service may have left lifted). */
  async restoreAll(running: { id: string; nanoCpus: number }[]): Promise<void> {
    for (const { id, nanoCpus } of running) {
      if (!this.available) return;
      if (nanoCpus > 0) await this.setQuota(id, quotaOf(nanoCpus));
    }
  }

  close() {
    for (const name of [...this.lifted.keys()]) this.end(name);
  }

  /** Sets the container's CPU quota (-1: none): done, the container gone or stopped, or why the engine could not. */
  private async setQuota(id: string, quota: number): Promise<"done" | "gone" | { failed: string }> {
    try {
      await new Promise<void>((resolve, reject) =>
        this.docker.modem.dial(
          {
            path: `/v4.0.0/libpod/containers/${encodeURIComponent(id)}/update`,
            method: "POST",
            options: { cpu: { quota, period: PERIOD_US } },
            statusCodes: {
              200: true,
              201: true,
              204: true,
              404: "no such container or no such call",
              500: "server error",
            },
          },
          (err: unknown) => (err ? reject(err) : resolve()),
        ),
      );
      return "done";
    } catch (err) {
      // A container gone, or stopped from outside meanwhile, starts under its limit next time.
      // Docker answers 404 for the path; podman answers 404 for a container that is gone.
      if (!(await this.runs(id))) return "gone";
      if (statusOf(err) === 404) {
        this.available = false;
        await this.log.info(
          "The container engine has no live CPU update: desktops start under their limit",
          {},
        );
      }
      return { failed: engineMessage(err) };
    }
  }

  private async runs(id: string): Promise<boolean> {
    return this.docker
      .getContainer(id)
      .inspect()
      .then(
        (info) => info.State.Running,
        () => false,
      );
  }
}

function quotaOf(nanoCpus: number): number {
  return Math.max(1000, Math.round((nanoCpus / 1e9) * PERIOD_US));
}
