/**
 * The Kubernetes runtime: a desktop is a Secret (what it is made of, its keys) and, while it runs,
 * a Pod of the desktop image (objects.ts). The cluster is the record: everything is read from
 * watches of the desktops' Secrets and Pods (cluster-view.ts), so several host services share
 * one namespace, each sees what the others made, and a restarted one finds everything again.
 *
 * `run` makes the Pod, `stop` deletes it (a persistent home's claim stays), `clone` makes a new
 * desktop of the same spec, `logs` are the Pod's, readiness is the Pod's readiness probe on the
 * computer server's `/status`. Clients reach a desktop through this service's loopback relay
 * (a port-forward through the API server, relay.ts), or at the Pod's IP from inside the cluster.
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { PassThrough, type Readable } from "node:stream";
import { Log, type V1Pod, type V1Secret } from "@kubernetes/client-node";
import type { HibernationMode } from "../desktops/hibernation.js";
import { containerImageReference } from "../desktops/image-reference.js";
import { displayOf, MIN_CONTAINER_MEMORY, positiveCpu, size } from "../desktops/limits.js";
import { needsMacHost } from "../desktops/macos.js";
import type { HibernatingRuntime, LogOptions, StopOutcome, WakeAddress } from "../desktops/runtime.js";
import type { EgressService } from "../egress/egress-service.js";
import { GATE_ANNOTATION, KubernetesCage } from "../egress/kubernetes-cage.js";
import { networkModeOf, policyOf, restricts } from "../egress/policy.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { KeyedLock } from "../keyed-lock.js";
import { vmName } from "../names.js";
import type { CloneRequest, CreateRequest, RunRequest, StopRequest, UpdateRequest } from "../requests.js";
import { type Cluster, type ClusterOptions, clusterError, connectCluster, statusCode } from "./cluster.js";
import { ClusterView } from "./cluster-view.js";
import {
  ANNOTATION,
  CONTAINER,
  checkDesktopName,
  claimName,
  type DesktopSpec,
  desktopNetworkPolicy,
  desktopPod,
  desktopSecret,
  homeClaim,
  LABEL,
  LOCATION,
  MANAGER,
  NETWORK_POLICY,
  NOVNC_PORT,
  objectName,
  SECRET_KEYS,
  SERVER_PORT,
  specAnnotations,
  specOf,
} from "./objects.js";
import {
  type KubernetesRecord,
  kubernetesRecord,
  type PodAddresses,
  podReady,
  podState,
} from "./pod-record.js";
import { PodRelay } from "./relay.js";

export const DEFAULT_KUBERNETES_IMAGE = "hangar:latest";

export interface KubernetesRuntimeOptions extends ClusterOptions {
  /** The image a desktop runs when its request names none. */
  desktopImage?: string;
  /** Give every desktop an API key of its own (its computer server in cloud mode). */
  desktopKeys?: boolean;
  /** The Pod's termination grace when a stop names none (default 10 s). */
  stopGraceMs?: number;
  /**
   * How the record's addresses reach a desktop: `relay` (a loopback port of this service,
   * forwarded through the API server; the default outside the cluster) or `pod-ip` (the Pod's IP,
   * for clients in the cluster; the default when the service runs in a Pod).
   */
  reach?: "relay" | "pod-ip";
  /** The egress policies and proxy: desktops made with a `network` policy are caged (kubernetes-cage.ts). */
  egress?: EgressService;
  /** Where the Pods reach this service's egress gates (`--egress-gate`): an IPv4 address of this host. */
  egressGate?: string;
  /**
   * The Pod Security level desktops of the service's desktop image meet (`--kubernetes-pod-security`):
   * `baseline` (the default: the entry point starts as root with a few capabilities, the computer
   * server stays root and the agent's processes are the desktop user's) or `restricted` (one
   * non-root user runs both, as any other image does).
   */
  podSecurity?: "baseline" | "restricted";
}

interface Relays {
  /** The Pod carried to; "" while the desktop sleeps or its new Pod starts (the relay is kept). */
  uid: string;
  server: PodRelay;
  vnc: PodRelay;
  opened: boolean;
}

export class KubernetesRuntime implements HibernatingRuntime {
  readonly kind = "kubernetes" as const;
  /** A desktop sleeps as its Pod deleted and its home kept on its claim: `disk` only. */
  readonly hibernation = { modes: ["disk"] } as const;
  private wakeRequest?: (name: string, why: string) => Promise<void>;
  readonly cluster: Cluster;
  private readonly secrets: ClusterView<V1Secret>;
  private readonly pods: ClusterView<V1Pod>;
  private readonly relays = new Map<string, Relays>();
  private readonly forward;
  private readonly locks = new KeyedLock();
  private readonly listeners: ((name: string) => void)[] = [];
  private readonly work = new Set<Promise<unknown>>();
  private readonly reach: "relay" | "pod-ip";
  private readonly identity = `${hostname()}/${process.pid}`;
  /** Why the watches could not start (until they do), and the timer of the next try. */
  private failure?: HostError = new HostError("unavailable", "Kubernetes desktops are not read yet");
  private retryTimer?: NodeJS.Timeout;
  private eventsRefused = false;
  private readonly cage?: KubernetesCage;

  constructor(
    private readonly options: KubernetesRuntimeOptions,
    private readonly log: HostLog,
  ) {
    this.cluster = connectCluster(options);
    this.reach = options.reach ?? (this.cluster.inCluster ? "pod-ip" : "relay");
    this.forward = PodRelay.forwarder(this.cluster.config);
    if (options.egress) {
      this.cage = new KubernetesCage(options.egress, log, options.egressGate, (name) => this.podIp(name));
    }
    const { core, namespace, config } = this.cluster;
    const selector = (part: string) => `${LABEL.part}=${part},${LABEL.managedBy}=${MANAGER}`;
    const watchState = (what: string) => (error: unknown) => {
      if (error) {
        void this.log.error("The watch of the cluster broke; it is started again", {
          watch: what,
          error: clusterError(error, this.cluster, `watching ${what}`).message,
        });
      } else {
        void this.log.info("The watch of the cluster is back", { watch: what });
        this.changed("");
      }
    };
    this.secrets = new ClusterView<V1Secret>(
      config,
      `/api/v1/namespaces/${namespace}/secrets`,
      () => core.listNamespacedSecret({ namespace, labelSelector: selector("desktop") }),
      selector("desktop"),
      {
        changed: (secret) => this.changed(secret.metadata?.labels?.[LABEL.desktop] ?? ""),
        watchState: watchState("desktops (secrets)"),
      },
    );
    this.pods = new ClusterView<V1Pod>(
      config,
      `/api/v1/namespaces/${namespace}/pods`,
      () => core.listNamespacedPod({ namespace, labelSelector: selector("pod") }),
      selector("pod"),
      {
        changed: (pod, gone) => this.podChanged(pod, gone),
        watchState: watchState("desktop pods"),
      },
    );
  }

  get defaultImage(): string {
    return this.options.desktopImage ?? DEFAULT_KUBERNETES_IMAGE;
  }

  /** Any well-formed reference: the node's kubelet pulls it when a Pod needs it (a failed pull is the record's `lastError`). */
  async hasImage(reference: string): Promise<boolean> {
    containerImageReference(reference);
    return true;
  }

  async pullImage(reference: string): Promise<void> {
    containerImageReference(reference);
    throw new HostError(
      "not_supported",
      "Kubernetes desktops need no pull: each node's kubelet pulls the image when a desktop's Pod starts there",
    );
  }

  async list(storage?: string): Promise<KubernetesRecord[]> {
    this.available();
    const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
    return this.secrets
      .list()
      .map((secret) => this.recordOf(secret))
      .filter((record) => !storage || record.locationName === storage)
      .sort((a, b) => collator.compare(a.name, b.name));
  }

  async find(name: string, storage?: string): Promise<KubernetesRecord | undefined> {
    this.available();
    const secret = this.secretOf(name);
    if (!secret) return undefined;
    const record = this.recordOf(secret);
    if (storage && record.locationName !== storage) return undefined;
    return record;
  }

  async create(request: CreateRequest & { name: string }) {
    const name = checkDesktopName(vmName(request.name));
    const os = request.os.toLowerCase();
    if (os === "macos" || os === "darwin") throw needsMacHost("A macOS desktop");
    if (os !== "linux") {
      throw new HostError(
        "invalid_params",
        `Unsupported OS type: ${request.os} (a Kubernetes desktop is linux)`,
      );
    }
    if (request.ipsw !== undefined) throw needsMacHost("An IPSW restore image (ipsw)");
    const policy = policyOf(request.network);
    // With a gate, a policy cages the desktop; without one, only the open network is accepted
    // (as the cluster's), and a policy that restricts is refused rather than left unenforced.
    const caged = policy !== undefined && (this.cage?.gated === true || restricts(policy));
    if (policy && caged) {
      if (!this.cage) {
        throw new HostError(
          "not_supported",
          'Kubernetes desktops are caged only by a host service with egress policies: only {"egress": "allow"} ' +
            "(the cluster's open network) is accepted here (docs/egress.md)",
        );
      }
      this.cage.check(policy);
    }
    const mode = networkModeOf(request.network);
    if (mode !== undefined && mode !== "nat") {
      throw new HostError(
        "not_supported",
        `Network mode '${mode}' is not supported for Kubernetes desktops: a Pod is on the cluster's network ('nat')`,
      );
    }
    const image = containerImageReference(request.image ?? this.defaultImage);
    const spec: DesktopSpec = {
      name,
      image,
      cpu: positiveCpu(request.cpu),
      memory: size(request.memory, "memory", MIN_CONTAINER_MEMORY),
      display: displayOf(request.display),
      diskSize: size(request.diskSize, "diskSize", MIN_CONTAINER_MEMORY),
      persistent: persistentLocation(request.storage),
      keyed: Boolean(this.options.desktopKeys),
      caged,
      // The service's desktop image (Hangar's) keeps its server out of the agent's reach, unless
      // the cluster allows only what Pod Security `restricted` does (then one user runs both).
      commandUser:
        this.options.podSecurity !== "restricted" && image === containerImageReference(this.defaultImage),
    };
    this.available();
    await this.locks.run(name, async () => {
      await this.makeDesktop(spec);
      if (!policy || !caged || !this.cage) return;
      // Made first, so that a name already taken keeps its own policy; a policy not kept unmakes it.
      await this.cage.remember(name, policy).catch(async (err) => {
        await this.deleteObject("Secret", objectName(name)).catch(() => undefined);
        throw err;
      });
    });
    this.event(name, "Created", `Desktop ${name} created (image ${spec.image})`);
    await this.log.info("Kubernetes desktop created", {
      vm: name,
      image: spec.image,
      namespace: this.cluster.namespace,
      persistent: spec.persistent,
    });
  }

  async remove(name: string, storage?: string) {
    await this.locks.run(name, async () => {
      const secret = this.secretOrFail(name, storage);
      await this.deletePod(name, 0);
      if (specOf(secret).persistent) await this.deleteObject("PersistentVolumeClaim", claimName(name));
      await this.deleteObject("Secret", objectName(name));
      this.secrets.drop(secret);
      this.closeRelay(name);
      await this.cage?.remove(name);
    });
    await this.log.info("Kubernetes desktop deleted", { vm: name, namespace: this.cluster.namespace });
  }

  /** A new desktop made like the source (its spec; new keys; a fresh home). */
  async clone(request: CloneRequest) {
    const sourceName = vmName(request.name);
    const newName = checkDesktopName(vmName(request.newName));
    if (newName === sourceName) {
      throw new HostError("invalid_params", `Cannot clone ${sourceName} onto itself: choose another newName`);
    }
    const source = this.secretOrFail(sourceName, request.sourceLocation);
    const spec = specOf(source);
    const persistent =
      request.destLocation !== undefined ? persistentLocation(request.destLocation) : spec.persistent;
    if (spec.persistent) {
      throw new HostError(
        "not_supported",
        `Cannot clone ${sourceName}: its home is a PersistentVolumeClaim, and copying a claim needs a CSI ` +
          "VolumeSnapshot class, which this runtime does not use yet (clone a desktop without a persistent disk)",
      );
    }
    await this.locks.run(newName, async () => {
      await this.makeDesktop({ ...spec, name: newName, persistent });
      if (spec.caged) await this.cage?.copy(sourceName, newName);
    });
    this.event(newName, "Created", `Desktop ${newName} created as a clone of ${sourceName}`);
    await this.log.info("Kubernetes desktop cloned", { source: sourceName, destination: newName });
  }

  async update(name: string, request: UpdateRequest) {
    await this.locks.run(name, async () => {
      const secret = this.secretOrFail(name);
      const spec = specOf(secret);
      if (request.storage !== undefined && persistentLocation(request.storage) !== spec.persistent) {
        throw new HostError("not_supported", "A Kubernetes desktop cannot move between storage locations");
      }
      const next: DesktopSpec = {
        ...spec,
        ...(request.cpu !== undefined && { cpu: positiveCpu(request.cpu) }),
        ...(request.memory !== undefined && { memory: size(request.memory, "memory", MIN_CONTAINER_MEMORY) }),
        ...(request.display !== undefined && { display: displayOf(request.display) }),
        ...(request.diskSize !== undefined && {
          diskSize: size(request.diskSize, "diskSize", MIN_CONTAINER_MEMORY),
        }),
      };
      if (spec.persistent && next.diskSize !== spec.diskSize) {
        throw new HostError(
          "not_supported",
          "diskSize of a persistent desktop is its claim's: it cannot change here",
        );
      }
      if (JSON.stringify(next) === JSON.stringify(spec)) return;
      if (podState(this.pods.get(objectName(name))).running) {
        throw new HostError(
          "failed",
          `Cannot change ${name} while it runs: a Pod's resources are fixed when it is made. Stop it first.`,
        );
      }
      const annotations = {
        ...(secret.metadata?.annotations ?? {}),
        ...specAnnotations(next, secret.metadata?.annotations?.["hangar.dev/created-by"] ?? this.identity),
      };
      await this.replaceAnnotations(secret, annotations, `updating desktop ${name}`);
    });
    await this.log.info("Kubernetes desktop settings updated", { vm: name });
  }

  async run(name: string, request: RunRequest): Promise<void> {
    if (request.recoveryMode) throw needsMacHost("Recovery mode (recoveryMode)");
    if (request.sharedDirectories && request.sharedDirectories.length > 0) {
      throw new HostError(
        "not_supported",
        "Shared directories are not supported for Kubernetes desktops: a Pod sees the node's files only through volumes",
      );
    }
    if (request.network !== undefined && request.network !== "nat") {
      throw new HostError(
        "not_supported",
        `Network mode '${request.network}' is not supported for Kubernetes desktops`,
      );
    }
    await this.locks.run(name, async () => {
      const secret = this.secretOrFail(name, request.storage);
      const existing = this.pods.get(objectName(name));
      if (existing && podState(existing).running) {
        throw new HostError("failed", `Virtual machine already running: ${name}`);
      }
      await this.replacePod(secret, name, existing);
    });
    this.event(name, "Started", `Pod ${objectName(name)} created`);
    await this.log.info("Kubernetes desktop started", { vm: name, pod: objectName(name) });
  }

  async stop(name: string, request: StopRequest = {}): Promise<StopOutcome> {
    const grace = request.force
      ? 0
      : request.graceSeconds !== undefined
        ? Math.ceil(request.graceSeconds)
        : this.graceSeconds();
    let asleep = false;
    await this.locks.run(name, async () => {
      const secret = this.secretOrFail(name, request.storage);
      asleep = secret.metadata?.annotations?.[ANNOTATION.hibernatedAt] !== undefined;
      const running = podState(this.pods.get(objectName(name))).running;
      // Asleep: it stays without a Pod, and no longer sleeps (its relay closes).
      if (asleep) await this.annotate(name, undefined);
      if (!running && asleep) return this.closeRelay(name);
      if (!running) throw new HostError("failed", `Virtual machine not running: ${name}`);
      await this.deletePod(name, grace);
      await this.cage?.closeGate(name);
    });
    if (asleep && !podState(this.pods.get(objectName(name))).running) return "quit";
    this.event(name, "Stopped", `Pod ${objectName(name)} deleted (grace ${grace} s)`);
    await this.log.info("Kubernetes desktop stopped", { vm: name, graceSeconds: grace });
    return grace === 0 ? "killed" : "powered down";
  }

  /**
   * Puts a running desktop to sleep: marked asleep on its Secret first (a killed service leaves a
   * mark, never a lost desktop), then its Pod deleted; its home stays on its claim, so only a
   * desktop made with `storage: "persistent"` can. Its relay stays open and wakes it.
   */
  async hibernate(name: string, mode: HibernationMode) {
    if (mode !== "disk") {
      throw new HostError(
        "invalid_params",
        `A Kubernetes desktop hibernates on 'disk' (its Pod goes, its home stays on its claim), not '${mode}'`,
      );
    }
    const grace = this.graceSeconds();
    await this.locks.run(name, async () => {
      const secret = this.secretOrFail(name);
      const running = podState(this.pods.get(objectName(name))).running;
      if (!running) {
        throw secret.metadata?.annotations?.[ANNOTATION.hibernatedAt] !== undefined
          ? new HostError("conflict", `${name} is already hibernated`)
          : new HostError("conflict", `Cannot hibernate ${name}: it is not running`);
      }
      if (!specOf(secret).persistent) {
        throw new HostError(
          "conflict",
          `Cannot hibernate ${name}: its home goes with its Pod (storage 'kubernetes'); a desktop made with storage 'persistent' keeps it on a claim while it sleeps`,
        );
      }
      await this.annotate(name, new Date().toISOString());
      await this.deletePod(name, grace);
      await this.cage?.closeGate(name);
    });
    this.event(name, "Hibernated", `Pod ${objectName(name)} deleted; the home stays on its claim`);
    await this.log.info("Kubernetes desktop hibernated", { vm: name, graceSeconds: grace });
  }

  /** Wakes a sleeping desktop: a new Pod on its home's claim; the mark goes once the Pod is made. */
  async resume(name: string, beforeStart?: () => Promise<void>) {
    await this.locks.run(name, async () => {
      const secret = this.secretOrFail(name);
      const existing = this.pods.get(objectName(name));
      if (podState(existing).running) {
        throw new HostError("conflict", `Virtual machine already running: ${name} (nothing to resume)`);
      }
      if (secret.metadata?.annotations?.[ANNOTATION.hibernatedAt] === undefined) {
        throw new HostError("conflict", `Cannot resume ${name}: it is not hibernated (run it instead)`);
      }
      await beforeStart?.();
      await this.replacePod(secret, name, existing);
      await this.annotate(name, undefined);
    });
    this.event(name, "Resumed", `Pod ${objectName(name)} created on the kept home`);
    await this.log.info("Kubernetes desktop resumed", { vm: name, pod: objectName(name) });
  }

  /** Nothing to listen at: a sleeping desktop's relay stays open and wakes it itself. */
  async wakeAddresses(): Promise<WakeAddress[]> {
    return [];
  }

  onWakeRequest(wake: (name: string, why: string) => Promise<void>) {
    this.wakeRequest = wake;
  }

  /** A new Pod for the desktop; one that ended (or cannot start) is deleted first. */
  private async replacePod(secret: V1Secret, name: string, existing: V1Pod | undefined) {
    if (existing) await this.deletePod(name, 0);
    const cage = specOf(secret).caged ? await this.cageOf(name) : undefined;
    try {
      const pod = await this.cluster.core.createNamespacedPod({
        namespace: this.cluster.namespace,
        body: desktopPod(secret, this.graceSeconds(), cage),
      });
      this.pods.put(pod);
    } catch (err) {
      if (cage) await this.cage?.closeGate(name);
      // One name per desktop: the API server refuses a second Pod (another service ran it).
      if (statusCode(err) === 409) throw new HostError("failed", `Virtual machine already running: ${name}`);
      throw clusterError(err, this.cluster, `creating the Pod of desktop ${name}`);
    }
  }

  /** A caged desktop's gate, opened, and what its Pod is made with; refused where it cannot be caged. */
  private async cageOf(name: string) {
    if (!this.cage?.gated || !this.cage.caged(name)) {
      throw new HostError(
        "failed",
        `${name} is caged by a network policy that this host service does not hold or cannot enforce ` +
          "(it was made by another service, or this one has no --egress-gate): it is not started on an open network",
      );
    }
    return this.cage.podSettings(name);
  }

  /** The desktop's Pod IP now: from the watch, or from the API server when the watch has not told it yet. */
  private async podIp(name: string): Promise<string | undefined> {
    const known = this.pods.get(objectName(name))?.status?.podIP;
    if (known) return known;
    const pod = await this.cluster.core
      .readNamespacedPod({ name: objectName(name), namespace: this.cluster.namespace })
      .catch(() => undefined);
    return pod?.status?.podIP;
  }

  /** Marks the desktop asleep (`at`) or awake (undefined) on its Secret, with the version read. */
  private async annotate(name: string, at: string | undefined) {
    const secret = this.secretOrFail(name);
    const annotations = { ...(secret.metadata?.annotations ?? {}) };
    if (at === undefined) {
      if (annotations[ANNOTATION.hibernatedAt] === undefined) return;
      delete annotations[ANNOTATION.hibernatedAt];
    } else annotations[ANNOTATION.hibernatedAt] = at;
    await this.replaceAnnotations(secret, annotations, `marking desktop ${name} ${at ? "asleep" : "awake"}`);
  }

  /**
   * The desktop's Secret with these annotations. The version read is part of the request: a change
   * made meanwhile by another service makes it fail (409), said as such.
   */
  private async replaceAnnotations(secret: V1Secret, annotations: Record<string, string>, what: string) {
    const name = secret.metadata?.labels?.[LABEL.desktop] ?? "";
    try {
      const replaced = await this.cluster.core.replaceNamespacedSecret({
        name: objectName(name),
        namespace: this.cluster.namespace,
        body: { ...secret, metadata: { ...secret.metadata, annotations } },
      });
      this.secrets.put(replaced);
    } catch (err) {
      if (statusCode(err) === 409) {
        throw new HostError("failed", `${name} was changed by someone else meanwhile: read it and try again`);
      }
      throw clusterError(err, this.cluster, what);
    }
  }

  /** Before a relayed connection: a desktop asleep, or whose Pod is not ready yet, is woken and waited for. */
  private async awake(name: string) {
    const pod = this.pods.get(objectName(name));
    if (podState(pod).running && pod?.status?.phase === "Running" && podReady(pod)) return;
    if (!this.wakeRequest) return;
    await this.wakeRequest(name, "a connection to its relay");
  }

  private closeRelay(name: string) {
    const relays = this.relays.get(objectName(name));
    if (!relays) return;
    relays.server.close();
    relays.vnc.close();
    this.relays.delete(objectName(name));
  }

  /** The Pod's output, as `kubectl logs [-f] [--tail N]` shows it. */
  async logs(name: string, options: LogOptions): Promise<Readable> {
    this.secretOrFail(name);
    const pod = this.pods.get(objectName(name));
    if (!pod) {
      throw new HostError("failed", `${name} has no Pod (it is stopped): a Pod's logs go with it`);
    }
    const out = new PassThrough();
    let controller: AbortController;
    try {
      controller = await new Log(this.cluster.config).log(
        this.cluster.namespace,
        objectName(name),
        CONTAINER,
        out,
        { follow: Boolean(options.follow), ...(options.lines !== undefined && { tailLines: options.lines }) },
      );
    } catch (err) {
      out.destroy();
      if (statusCode(err) === 400) {
        throw new HostError("failed", `${name} has no logs yet: its container has not started`);
      }
      throw clusterError(err, this.cluster, `reading the logs of ${name}`);
    }
    const abort = () => {
      controller.abort();
      out.end();
    };
    if (options.signal.aborted) abort();
    else options.signal.addEventListener("abort", abort, { once: true });
    out.once("close", () => {
      options.signal.removeEventListener("abort", abort);
      controller.abort();
    });
    return out;
  }

  /**
   * Starts the watches (a Role without list/watch of Secrets and Pods fails here, clearly), makes
   * the namespace's NetworkPolicy when it is missing, and removes Pods whose desktop is gone (left
   * when a desktop's Secret was deleted where the cluster's garbage collector does not run).
   */
  async recover() {
    await this.startWatches();
    await this.ensureNetworkPolicy();
    for (const pod of this.pods.list()) {
      const name = pod.metadata?.labels?.[LABEL.desktop] ?? "";
      if (!this.secretOf(name)) {
        await this.log.info("Removing a Pod whose desktop is gone", { pod: pod.metadata?.name });
        await this.deletePod(name, 0).catch(() => undefined);
      }
    }
    // A mark left on a desktop whose Pod runs (a resume whose service was killed): it is awake.
    for (const secret of this.secrets.list()) {
      const name = secret.metadata?.labels?.[LABEL.desktop] ?? "";
      const marked = secret.metadata?.annotations?.[ANNOTATION.hibernatedAt] !== undefined;
      if (marked && podState(this.pods.get(objectName(name))).running) {
        await this.locks.run(name, () => this.annotate(name, undefined)).catch(() => undefined);
      }
    }
    // Caged Pods that ran on get their gates back, on the ports their filters send to.
    for (const pod of this.pods.list()) {
      const name = pod.metadata?.labels?.[LABEL.desktop] ?? "";
      if (podState(pod).running) await this.cage?.recover(name, pod.metadata?.annotations?.[GATE_ANNOTATION]);
    }
    // Sleeping desktops get their relay back, to wake them.
    if (this.reach === "relay") {
      for (const record of await this.list()) {
        if (record.status === "hibernated") this.openRelay(record.name, objectName(record.name), "");
      }
    }
  }

  /**
   * Lists and watches the desktops' Secrets and Pods. Until that has worked, every request is
   * answered with why (a Role without list/watch, an API server away), and it is tried again
   * every few seconds, so that a fixed Role needs no restart.
   */
  private async startWatches(retrying = false) {
    try {
      await this.secrets.start().catch((err) => {
        throw clusterError(err, this.cluster, "listing and watching desktops (Secrets)");
      });
      await this.pods.start().catch((err) => {
        throw clusterError(err, this.cluster, "listing and watching desktop Pods");
      });
      this.failure = undefined;
    } catch (err) {
      this.failure = new HostError(
        "unavailable",
        `Kubernetes desktops are unavailable: ${(err as Error).message}`,
      );
      clearTimeout(this.retryTimer);
      this.retryTimer = setTimeout(() => {
        void this.startWatches(true).then(() => {
          if (!this.failure) this.changed("");
        });
      }, 5000);
      this.retryTimer.unref();
      if (!retrying) throw this.failure;
      return;
    }
  }

  /** Throws why the cluster's desktops cannot be read, while they cannot. */
  private available() {
    if (this.failure) throw this.failure;
  }

  async settled() {
    while (this.work.size > 0) await Promise.all([...this.work]);
  }

  async close() {
    clearTimeout(this.retryTimer);
    await this.settled();
    await this.pods.close();
    await this.secrets.close();
    await this.cage?.close();
    for (const relays of this.relays.values()) {
      relays.server.close();
      relays.vnc.close();
    }
    this.relays.clear();
  }

  onChange(listener: (name: string) => void) {
    this.listeners.push(listener);
  }

  // ---- the cluster's objects ----

  private changed(name: string) {
    for (const listener of [...this.listeners]) listener(name);
  }

  private graceSeconds(): number {
    return Math.max(0, Math.ceil((this.options.stopGraceMs ?? 10_000) / 1000));
  }

  private secretOf(name: string): V1Secret | undefined {
    if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(name)) return undefined;
    const secret = this.secrets.get(objectName(name));
    return secret?.metadata?.labels?.[LABEL.desktop] === name ? secret : undefined;
  }

  private secretOrFail(name: string, storage?: string): V1Secret {
    const secret = this.secretOf(name);
    if (!secret || (storage && this.recordOf(secret).locationName !== storage)) {
      throw new HostError("not_found", `Virtual machine not found: ${name}`);
    }
    return secret;
  }

  private recordOf(secret: V1Secret): KubernetesRecord {
    const name = secret.metadata?.labels?.[LABEL.desktop] ?? "";
    const pod = this.pods.get(objectName(name));
    return kubernetesRecord(secret, pod, this.addressesOf(name, pod), this.cluster.namespace);
  }

  private addressesOf(name: string, pod: V1Pod | undefined): PodAddresses {
    if (this.reach === "pod-ip") {
      const ip = pod?.status?.podIP;
      return ip
        ? { server: `${ip}:${SERVER_PORT}`, vnc: `${ip}:${NOVNC_PORT}` }
        : { server: null, vnc: null };
    }
    // A relay kept while the desktop sleeps (or its new Pod starts) answers for it.
    const relays = this.relays.get(objectName(name));
    if (!relays?.opened || (relays.uid !== "" && relays.uid !== pod?.metadata?.uid)) {
      return { server: null, vnc: null };
    }
    return { server: relays.server.address, vnc: relays.vnc.address };
  }

  /** Keeps a relay open for each running Pod (in `relay` mode), and says the desktop changed. */
  private podChanged(pod: V1Pod, gone: boolean) {
    const podName = pod.metadata?.name ?? "";
    const name = pod.metadata?.labels?.[LABEL.desktop] ?? "";
    if (this.reach === "relay") {
      const current = this.relays.get(podName);
      const running = !gone && podState(pod).running && pod.status?.phase === "Running";
      const uid = pod.metadata?.uid ?? "";
      const asleep = this.secretOf(name)?.metadata?.annotations?.[ANNOTATION.hibernatedAt] !== undefined;
      if (current && running && current.uid === "") {
        current.uid = uid; // the woken desktop's new Pod takes the relay kept for it
      } else if (current && !running && (asleep || (current.uid === "" && !gone))) {
        current.uid = ""; // asleep, or its new Pod starts: kept, to wake it and answer
      } else if (current && (!running || current.uid !== uid)) {
        this.closeRelay(name);
      }
      if (running && !this.relays.has(podName) && uid) this.openRelay(name, podName, uid);
    }
    this.changed(name);
  }

  /** A loopback relay for the desktop's server and viewer (`uid`: the Pod carried to, "" while asleep). */
  private openRelay(name: string, podName: string, uid: string) {
    if (this.relays.has(podName)) return;
    const relays: Relays = {
      uid,
      server: new PodRelay(this.forward, this.cluster.namespace, podName, SERVER_PORT),
      vnc: new PodRelay(this.forward, this.cluster.namespace, podName, NOVNC_PORT),
      opened: false,
    };
    relays.server.beforeCarry = () => this.awake(name);
    relays.vnc.beforeCarry = () => this.awake(name);
    this.relays.set(podName, relays);
    this.track(
      Promise.all([relays.server.open(), relays.vnc.open()]).then(
        () => {
          if (this.relays.get(podName) !== relays) return;
          relays.opened = true;
          this.changed(name);
        },
        (err: Error) => {
          this.relays.delete(podName);
          void this.log.error("Cannot open a loopback relay for a desktop", {
            vm: name,
            error: err.message,
          });
        },
      ),
    );
  }

  /** The Secret (the desktop), then its home's claim when it has one; nothing left when a step fails. */
  private async makeDesktop(spec: DesktopSpec) {
    const secrets: Record<string, string> = {
      [SECRET_KEYS.vncPassword]: `${randomBytes(6).toString("base64url")}\n`,
      ...(spec.keyed && { [SECRET_KEYS.apiKeys]: `${randomBytes(24).toString("base64url")}\n` }),
    };
    let secret: V1Secret;
    try {
      secret = await this.cluster.core.createNamespacedSecret({
        namespace: this.cluster.namespace,
        body: desktopSecret(spec, secrets, this.identity),
      });
    } catch (err) {
      if (statusCode(err) === 409) {
        throw new HostError(
          "failed",
          `Virtual machine already exists with name: ${spec.name} (namespace ${this.cluster.namespace} has a Secret ${objectName(spec.name)})`,
        );
      }
      throw clusterError(err, this.cluster, `creating desktop ${spec.name} (a Secret)`);
    }
    this.secrets.put(secret);
    if (!spec.persistent) return;
    try {
      await this.cluster.core.createNamespacedPersistentVolumeClaim({
        namespace: this.cluster.namespace,
        body: homeClaim(secret),
      });
    } catch (err) {
      await this.deleteObject("Secret", objectName(spec.name)).catch(() => undefined);
      this.secrets.drop(secret);
      throw clusterError(
        err,
        this.cluster,
        `creating the home of desktop ${spec.name} (a PersistentVolumeClaim)`,
      );
    }
  }

  /** Deletes the desktop's Pod (with this grace) and waits until the cluster says it is gone. */
  private async deletePod(name: string, graceSeconds: number) {
    const podName = objectName(name);
    const pod = this.pods.get(podName);
    const gone = this.podGone(podName, (graceSeconds + 60) * 1000);
    try {
      await this.cluster.core.deleteNamespacedPod({
        name: podName,
        namespace: this.cluster.namespace,
        gracePeriodSeconds: graceSeconds,
      });
    } catch (err) {
      gone.cancel();
      if (statusCode(err) === 404) {
        if (pod) this.pods.drop(pod);
        return;
      }
      throw clusterError(err, this.cluster, `deleting the Pod of desktop ${name}`);
    }
    await gone.done;
  }

  /** Resolves when the watch says the Pod is deleted (or after `ms`: the watch may be broken). */
  private podGone(podName: string, ms: number): { done: Promise<void>; cancel(): void } {
    let cancel: () => void = () => {};
    const done = new Promise<void>((resolve) => {
      const check = () => {
        if (!this.pods.get(podName)) finish();
      };
      const timer = setTimeout(() => finish(), ms);
      let finished = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        this.listeners.splice(this.listeners.indexOf(check), 1);
        resolve();
      };
      cancel = finish;
      this.listeners.push(check);
    });
    return { done, cancel: () => cancel() };
  }

  private async deleteObject(kind: "Secret" | "PersistentVolumeClaim", name: string) {
    const { core, namespace } = this.cluster;
    try {
      if (kind === "Secret") {
        await core.deleteNamespacedSecret({ name, namespace, propagationPolicy: "Background" });
      } else {
        await core.deleteNamespacedPersistentVolumeClaim({ name, namespace });
      }
    } catch (err) {
      if (statusCode(err) !== 404) throw clusterError(err, this.cluster, `deleting ${kind} ${name}`);
    }
  }

  private async ensureNetworkPolicy() {
    try {
      await this.cluster.networking.createNamespacedNetworkPolicy({
        namespace: this.cluster.namespace,
        body: desktopNetworkPolicy(),
      });
      await this.log.info("NetworkPolicy for desktops created", {
        namespace: this.cluster.namespace,
        name: NETWORK_POLICY,
      });
    } catch (err) {
      if (statusCode(err) === 409) return;
      await this.log.error("Cannot make the desktops' NetworkPolicy; desktops are not isolated", {
        namespace: this.cluster.namespace,
        error: clusterError(err, this.cluster, "creating the NetworkPolicy").message,
      });
    }
  }

  /**
   * An Event on the desktop's Secret, for `kubectl describe` and the cluster's event tooling; in
   * the background, and never a reason for the operation to fail (a Role without `create events`
   * is said once in the log).
   */
  private event(name: string, reason: string, message: string) {
    const secret = this.secretOf(name);
    if (!secret?.metadata?.uid || this.eventsRefused) return;
    const now = new Date();
    const { core, namespace } = this.cluster;
    this.track(
      core
        .createNamespacedEvent({
          namespace,
          body: {
            metadata: { generateName: `${objectName(name)}.` },
            involvedObject: {
              apiVersion: "v1",
              kind: "Secret",
              name: objectName(name),
              namespace,
              uid: secret.metadata.uid,
            },
            reason,
            message,
            type: "Normal",
            source: { component: "hangar-host" },
            firstTimestamp: now,
            lastTimestamp: now,
            count: 1,
          },
        })
        .catch((err: unknown) => {
          if (statusCode(err) !== 403) return;
          this.eventsRefused = true;
          void this.log.info("Kubernetes events are not recorded: the Role does not allow creating them", {
            namespace,
          });
        }),
    );
  }

  private track(work: Promise<unknown>) {
    this.work.add(work);
    void work.finally(() => this.work.delete(work));
  }
}

function persistentLocation(storage: string | undefined): boolean {
  if (storage === undefined || storage === LOCATION.ephemeral) return false;
  if (storage === LOCATION.persistent) return true;
  throw new HostError(
    "invalid_params",
    `Kubernetes desktops have two storage locations: '${LOCATION.ephemeral}' (the home goes with the Pod, the default) ` +
      `or '${LOCATION.persistent}' (a PersistentVolumeClaim that outlives it), not '${storage}'`,
  );
}
