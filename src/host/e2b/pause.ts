/**
 * How a sandbox is paused and resumed: the VM service's hibernation (desktops/hibernation.ts), its
 * identity kept. E2B's pause keeps the sandbox's memory and processes unless asked for its files
 * only (`memory: false`); each runtime keeps what it can:
 *
 * - memory kept: QEMU saves the running state to disk (`memory`), a container's processes are
 *   frozen where they are (`paused`: nothing runs, the memory stays held on the host);
 * - files only: a container stopped with its writable layer, a Pod scaled to zero with its home
 *   (`disk`); the desktop starts again from them on resume.
 *
 * What a runtime cannot keep is refused (E2B's 400, before anything is touched), never quietly
 * downgraded, as E2B's API says of a memory restore it cannot do.
 */

import type { DesktopService } from "../desktops/desktop-service.js";
import type { HibernationMode } from "../desktops/hibernation.js";
import type { RuntimeKind } from "../desktops/kinds.js";
import { canHibernate } from "../desktops/runtime.js";

export interface Pauser {
  /** Why desktops of this runtime cannot be paused so (`keepMemory`: processes and memory kept); undefined when they can. */
  refusal(runtime: RuntimeKind, keepMemory: boolean): string | undefined;
  /** Pauses a running desktop: resolves once it sleeps. */
  pause(desktop: string, runtime: RuntimeKind, keepMemory: boolean): Promise<void>;
  /** Wakes a paused desktop: resolves once it runs again. */
  resume(desktop: string): Promise<void>;
}

export function hibernationPauser(vms: DesktopService): Pauser {
  /** The hibernation mode that keeps what is asked, or undefined where the runtime has none. */
  const modeFor = (runtime: RuntimeKind, keepMemory: boolean): HibernationMode | undefined => {
    const desktops = vms.runtime(runtime);
    if (!canHibernate(desktops)) return undefined;
    const modes: readonly HibernationMode[] = desktops.hibernation.modes;
    return keepMemory ? modes.find((m) => m === "memory" || m === "paused") : modes.find((m) => m === "disk");
  };
  return {
    refusal(runtime, keepMemory) {
      if (modeFor(runtime, keepMemory)) return undefined;
      const desktops = vms.runtime(runtime);
      if (!canHibernate(desktops)) return `Pausing is not supported for ${runtime} desktops on this host`;
      return keepMemory
        ? `Pausing with memory is not supported for ${runtime} desktops: they keep their files only (pause with keepMemory: false)`
        : `Pausing without memory is not supported for ${runtime} desktops: they keep their memory (pause with memory kept)`;
    },
    async pause(desktop, runtime, keepMemory) {
      await vms.hibernate(desktop, modeFor(runtime, keepMemory));
    },
    async resume(desktop) {
      await vms.resume(desktop);
    },
  };
}
