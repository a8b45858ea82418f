/**
 * The VM record of `GET /svc/vms[/:name]`: lume's 15 keys, always present, `null` where unknown,
 * plus a few of Hangar's own (MAC address, forwarded ports, the computer server's URL, the last
 * start failure).
 */
import type { Session } from "./qemu/session.js";
import type { SshProbe } from "./ssh-probe.js";
import type { VmConfig } from "./vm-config.js";
import type { DiskUsage, VmRef } from "./vm-store.js";

export interface VmDetails {
  name: string;
  os: string;
  cpuCount: number;
  memorySize: number;
  diskSize: DiskUsage;
  display: string;
  /** lume's two, and Hangar's `hibernated` (asleep, its identity kept: runtimes/hibernation.ts). */
  status: "running" | "stopped" | "hibernated";
  provisioningOperation: null;
  vncUrl: string | null;
  ipAddress: string | null;
  sshAvailable: boolean | null;
  locationName: string;
  sharedDirectories: Session["sharedDirectories"] | null;
  networkMode: string;
  downloadProgress: null;
  macAddress: string | null;
  forwardedPorts: Record<string, string> | null;
  computerServerUrl: string | null;
  lastError: string | null;
}

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
): VmDetails {
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
