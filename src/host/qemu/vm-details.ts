/** A QEMU VM's record (desktops/desktop-details.ts) from its directory, its config and its run. */
import type { DesktopDetails, DiskUsage } from "../desktops/desktop-details.js";
import type { Session } from "./session.js";
import type { SshProbe } from "./ssh-probe.js";
import type { VmConfig } from "./vm-config.js";
import type { VmRef } from "./vm-store.js";

export function vmDetails(
  vm: VmRef,
  config: VmConfig,
  disk: DiskUsage,
  state: {
    starting: boolean;
    session?: Session;
    lastError: string | null;
    ssh: SshProbe;
    /** Asleep: `session` is the run it will resume as (nothing is probed: a probe would wake it). */
    hibernated?: boolean;
  },
): DesktopDetails {
  const { session } = state;
  const ip = session?.ipAddress || null;
  const ports = session?.forwardedPorts ?? {};
  const vnc = session?.vnc;
  return {
    name: vm.name,
    os: config.os,
    cpuCount: config.cpuCount ?? 0,
    memorySize: config.memorySize ?? 0,
    diskSize: disk,
    display: config.display,
    status: state.hibernated ? "hibernated" : state.starting || session ? "running" : "stopped",
    provisioningOperation: null,
    vncUrl: vnc?.port ? `vnc://:${vnc.password}@${vnc.host}:${vnc.port}` : null,
    ipAddress: ip,
    sshAvailable: ip && ports["22"] && !state.hibernated ? state.ssh.available(ip, ports["22"]) : null,
    locationName: vm.location.name,
    sharedDirectories: session && !state.hibernated ? session.sharedDirectories : null,
    networkMode: config.networkMode ?? "nat",
    downloadProgress: null,
    macAddress: config.macAddress ?? null,
    forwardedPorts:
      ip && Object.keys(ports).length > 0
        ? Object.fromEntries(Object.entries(ports).map(([guest, host]) => [guest, `${ip}:${host}`]))
        : null,
    computerServerUrl: ip && ports["8000"] ? `http://${ip}:${ports["8000"]}` : null,
    lastError: state.lastError,
  };
}
