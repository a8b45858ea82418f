/**
 * How a sandbox is paused and resumed, behind one small interface so that the control plane does
 * not care what does it. Today that is the VM service's snapshot machinery: a desktop whose
 * runtime takes whole-state snapshots (QEMU) is snapshotted with its memory, then stopped, and
 * restored on resume, its processes and open files as they were. A runtime without snapshots is
 * refused with a sentence that says so (E2B's 400, before anything is touched).
 */
import { HostError } from "../errors.js";
import type { RuntimeKind } from "../runtimes/kinds.js";
import type { VmService } from "../vm-service.js";

export interface Pauser {
  /** Why desktops of this runtime cannot be paused; undefined when they can. */
  refusal(runtime: RuntimeKind): string | undefined;
  /** Pauses a running desktop: resolves once its state is kept and it no longer runs. */
  pause(desktop: string): Promise<void>;
  /** Brings a paused desktop back as it was: resolves once it runs again. */
  resume(desktop: string): Promise<void>;
}

/** The snapshot a paused sandbox's desktop is kept in (one per desktop, replaced at each pause). */
const PAUSE_SNAPSHOT = "e2b-paused";

export function snapshotPauser(vms: VmService): Pauser {
  return {
    refusal(runtime) {
      if (vms.runtime(runtime).snapshot) return undefined;
      return (
        `Pausing is not supported for ${runtime} desktops on this host: a paused sandbox is kept as a ` +
        "snapshot of its whole state, and only QEMU desktops have those (kill the sandbox instead, or run " +
        "sandboxes as QEMU desktops)"
      );
    },
    async pause(desktop) {
      await vms.deleteSnapshot(desktop, PAUSE_SNAPSHOT).catch((err) => {
        if (!(err instanceof HostError) || err.kind === "unavailable") throw err;
      });
      await vms.snapshot(desktop, PAUSE_SNAPSHOT);
      await vms.stop(desktop, { force: true });
    },
    async resume(desktop) {
      await vms.restore(desktop, PAUSE_SNAPSHOT);
    },
  };
}
