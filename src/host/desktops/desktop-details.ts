/**
 * The VM record of `GET /svc/vms[/:name]`: lume's 15 keys, always present, `null` where unknown,
 * plus a few of Hangar's own (MAC address, forwarded ports, the computer server's URL, the last
 * start failure).
 */

/** A desktop's disk: bytes its files take, and the size the guest sees. */
export interface DiskUsage {
  allocated: number;
  total: number;
}

/** A host directory the desktop sees (QEMU's virtiofs shares, a container's bind mounts). */
export interface SharedDirectory {
  hostPath: string;
  tag: string;
  readOnly: boolean;
}

export interface DesktopDetails {
  name: string;
  os: string;
  cpuCount: number;
  memorySize: number;
  diskSize: DiskUsage;
  display: string;
  /** lume's two, and Hangar's `hibernated` (asleep, its identity kept: desktops/hibernation.ts). */
  status: "running" | "stopped" | "hibernated";
  provisioningOperation: null;
  vncUrl: string | null;
  ipAddress: string | null;
  sshAvailable: boolean | null;
  locationName: string;
  sharedDirectories: SharedDirectory[] | null;
  networkMode: string;
  downloadProgress: null;
  macAddress: string | null;
  forwardedPorts: Record<string, string> | null;
  computerServerUrl: string | null;
  lastError: string | null;
}
