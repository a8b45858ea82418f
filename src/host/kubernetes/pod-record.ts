/**
 * A Kubernetes desktop's record, in lume's shape, from its Secret (what it is made of, its keys)
 * and its Pod while there is one (state, readiness, address). A Pod waiting on something that
 * will not come by itself (an image that cannot be pulled, a bad config) counts as stopped, with
 * the reason in `lastError`, so that a wait for it ends at once.
 */
import type { V1Pod, V1Secret } from "@kubernetes/client-node";
import type { RuntimeRecord } from "../desktops/runtime.js";
import { ANNOTATION, LOCATION, SECRET_KEYS, specOf } from "./objects.js";

export type KubernetesRecord = RuntimeRecord & {
  image: string;
  namespace: string;
  /** The Pod while there is one, and the node it runs on. */
  pod: string | null;
  node: string | null;
};

/** Where the record's addresses point: a loopback relay of this service, or the Pod's own IP. */
export interface PodAddresses {
  server: string | null;
  vnc: string | null;
}

const STUCK = new Set([
  "ErrImagePull",
  "ImagePullBackOff",
  "InvalidImageName",
  "ErrImageNeverPull",
  "CreateContainerConfigError",
  "CreateContainerError",
  "RunContainerError",
]);

/** The Pod's state as lume says it: running (started or starting), or stopped with why. */
export function podState(pod: V1Pod | undefined): { running: boolean; error: string | null } {
  if (!pod || pod.metadata?.deletionTimestamp) return { running: false, error: null };
  const status = pod.status;
  const container = status?.containerStatuses?.[0];
  const waiting = container?.state?.waiting;
  if (waiting?.reason && STUCK.has(waiting.reason)) {
    return { running: false, error: `${waiting.reason}: ${waiting.message ?? "the container cannot start"}` };
  }
  if (status?.phase === "Failed" || status?.phase === "Succeeded") {
    const ended = container?.state?.terminated;
    const code = ended?.exitCode;
    const error =
      status.phase === "Failed" || (code !== undefined && code !== 0 && code !== 143)
        ? `exited${code !== undefined ? ` with code ${code}` : ""}${ended?.reason ? ` (${ended.reason})` : ""}${
            status.message ? `: ${status.message}` : ""
          }${ended?.finishedAt ? ` at ${new Date(ended.finishedAt).toISOString()}` : ""}`
        : null;
    return { running: false, error };
  }
  const unschedulable = status?.conditions?.find((c) => c.type === "PodScheduled" && c.status === "False");
  return {
    running: true,
    error: unschedulable
      ? `${unschedulable.reason ?? "Unschedulable"}: ${unschedulable.message ?? ""}`
      : null,
  };
}

export function podReady(pod: V1Pod | undefined): boolean {
  return pod?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

export function secretValue(secret: V1Secret, key: string): string | undefined {
  const data = secret.data?.[key];
  if (!data) return undefined;
  return Buffer.from(data, "base64").toString("utf8").split("\n")[0].trim() || undefined;
}

export function kubernetesRecord(
  secret: V1Secret,
  pod: V1Pod | undefined,
  addresses: PodAddresses,
  namespace: string,
): KubernetesRecord {
  const spec = specOf(secret);
  const state = podState(pod);
  const running = state.running;
  // Asleep: no Pod, its home on its claim; its relay (if any) still answers, to wake it.
  const hibernatedAt = running ? undefined : secret.metadata?.annotations?.[ANNOTATION.hibernatedAt];
  const asleep = hibernatedAt !== undefined;
  const server = running || asleep ? addresses.server : null;
  const vnc = running || asleep ? addresses.vnc : null;
  const forwarded: Record<string, string> = {};
  if (server) forwarded["8000"] = server;
  if (vnc) forwarded["6080"] = vnc;
  const password = secretValue(secret, SECRET_KEYS.vncPassword) ?? "";
  const started = pod?.status?.startTime ?? pod?.metadata?.creationTimestamp;
  const record: KubernetesRecord = {
    name: spec.name,
    os: "linux",
    cpuCount: spec.cpu,
    memorySize: spec.memory,
    diskSize: { allocated: 0, total: spec.diskSize },
    display: spec.display,
    status: running ? "running" : asleep ? "hibernated" : "stopped",
    provisioningOperation: null,
    vncUrl: vnc ? `http://${vnc}/vnc.html?autoconnect=1&password=${encodeURIComponent(password)}` : null,
    ipAddress: running ? (pod?.status?.podIP ?? null) : null,
    sshAvailable: null,
    locationName: spec.persistent ? LOCATION.persistent : LOCATION.ephemeral,
    sharedDirectories: null,
    networkMode: "cluster",
    downloadProgress: null,
    macAddress: null,
    forwardedPorts: Object.keys(forwarded).length > 0 ? forwarded : null,
    computerServerUrl: server ? `http://${server}` : null,
    lastError: asleep ? null : state.error,
    runtime: "kubernetes",
    startedAt: running && started ? new Date(started).toISOString() : null,
    ready: running && server !== null && podReady(pod),
    image: spec.image,
    namespace,
    pod: pod?.metadata?.name ?? null,
    node: pod?.spec?.nodeName ?? null,
    ...(asleep && { hibernation: "disk" as const, hibernatedAt, hibernationBytes: 0 }),
  };
  const key = spec.keyed ? secretValue(secret, SECRET_KEYS.apiKeys) : undefined;
  if (key) record.apiKey = key;
  return record;
}
