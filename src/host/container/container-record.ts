/**
 * A container desktop's record, in lume's shape, from what the engine says of the container
 * (`docker inspect`) and its labels: the computer server's and noVNC's ports published on
 * loopback become `computerServerUrl` and `vncUrl`.
 */
import type { ContainerInspectInfo } from "dockerode";
import type { RuntimeRecord } from "../desktops/runtime.js";
import type { SleepMark } from "./container-sleep.js";
import { LABEL } from "./labels.js";
import type { DesktopSecretValues } from "./secrets.js";

/** The container's ports: the computer server (plain HTTP; keys without TLS on loopback) and noVNC. */
export const SERVER_PORT = "8000/tcp";
export const NOVNC_PORT = "6080/tcp";
/** OSWorld's controller API (the image serves it on 5000, docs/osworld.md). */
export const OSWORLD_PORT = "5000/tcp";

/** Where container desktops are, for lume's `locationName` and `storage` filters. */
export const CONTAINER_LOCATION = "container";

export type ContainerRecord = RuntimeRecord & {
  /** The image the desktop was made from, and the container's id on the engine. */
  image: string;
  containerId: string;
};

export function containerRecord(
  info: ContainerInspectInfo,
  state: {
    starting: boolean;
    lastError: string | null;
    secrets: DesktopSecretValues;
    /** How it went to sleep, when it did (container-sleep.ts). */
    sleep?: SleepMark;
  },
): ContainerRecord {
  const labels = info.Config.Labels ?? {};
  const paused = !state.starting && info.State.Paused;
  const running = !paused && (state.starting || info.State.Running || info.State.Restarting);
  // Stopped with its files after a `disk` hibernate; its ports are the engine's to give again.
  const onDisk = !running && !paused && state.sleep?.mode === "disk";
  const asleep = paused || onDisk;
  const ports = info.NetworkSettings?.Ports ?? {};
  const published = (port: string) => {
    const binding =
      running || paused ? ports[port]?.[0] : onDisk ? info.HostConfig.PortBindings?.[port]?.[0] : undefined;
    if (!binding?.HostPort) return undefined;
    const host = binding.HostIp && binding.HostIp !== "0.0.0.0" ? binding.HostIp : "127.0.0.1";
    return {
      host,
      port: binding.HostPort,
      address: `${host.includes(":") ? `[${host}]` : host}:${binding.HostPort}`,
    };
  };
  const server = published(SERVER_PORT);
  const viewer = published(NOVNC_PORT);
  const forwarded: Record<string, string> = {};
  if (server) forwarded["8000"] = server.address;
  if (viewer) forwarded["6080"] = viewer.address;
  const osworld = published(OSWORLD_PORT);
  if (osworld) forwarded["5000"] = osworld.address;
  const password = state.secrets.vncPassword;
  const nanoCpus = info.HostConfig.NanoCpus ?? 0;
  const quotaCpus =
    info.HostConfig.CpuQuota && info.HostConfig.CpuPeriod
      ? info.HostConfig.CpuQuota / info.HostConfig.CpuPeriod
      : 0;
  const exited = !running && !asleep && info.State.FinishedAt && !info.State.FinishedAt.startsWith("0001");
  const engineError = info.State.Error ? info.State.Error : null;
  const record: ContainerRecord = {
    name: labels[LABEL.desktop] ?? info.Name.replace(/^\//, ""),
    os: "linux",
    cpuCount: Math.round(nanoCpus > 0 ? nanoCpus / 1e9 : quotaCpus),
    memorySize: info.HostConfig.Memory ?? 0,
    diskSize: { allocated: 0, total: Number(labels[LABEL.diskSize] ?? 0) },
    display: labels[LABEL.display] ?? "1280x800",
    status: asleep ? "hibernated" : running ? "running" : "stopped",
    provisioningOperation: null,
    vncUrl: viewer
      ? `http://${viewer.address}/vnc.html?autoconnect=1&password=${encodeURIComponent(password)}`
      : null,
    ipAddress: server ? server.host : null,
    sshAvailable: null,
    locationName: CONTAINER_LOCATION,
    sharedDirectories: null,
    networkMode: "nat",
    downloadProgress: null,
    macAddress: Object.values(info.NetworkSettings?.Networks ?? {})[0]?.MacAddress || null,
    forwardedPorts: Object.keys(forwarded).length > 0 ? forwarded : null,
    computerServerUrl: server ? `http://${server.address}` : null,
    lastError:
      state.lastError ??
      (exited && info.State.ExitCode !== 0 && engineError
        ? engineError
        : exited && info.State.ExitCode !== 0 && info.State.ExitCode !== 143
          ? `exited with code ${info.State.ExitCode} at ${info.State.FinishedAt}`
          : null),
    runtime: "container",
    startedAt: running && !state.starting ? info.State.StartedAt : null,
    ...(asleep && {
      hibernation: paused ? ("paused" as const) : ("disk" as const),
      hibernatedAt: state.sleep?.at ?? null,
      hibernationBytes: 0,
    }),
    image: labels[LABEL.image] ?? info.Config.Image,
    containerId: info.Id,
  };
  if (state.secrets.apiKey) record.apiKey = state.secrets.apiKey;
  return record;
}
