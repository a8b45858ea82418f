/**
 * The container runtime: a desktop is a container of the project's desktop image (or another),
 * made and run through the Docker Engine API, so Docker and podman both serve. The engine is the
 * record: every container Hangar makes carries labels (labels.ts) and is found again by them after
 * a restart. Secrets go in as read-only files (secrets.ts); the computer server's and noVNC's
 * ports are published on loopback only.
 *
 * What a container cannot change in place is done by making a new container from a commit of the
 * old one's writable layer (its files are kept): new cpu or memory limits where the engine has no
 * update call (podman), and clones.
 */
import { randomBytes } from "node:crypto";
import type { Readable } from "node:stream";
import type Dockerode from "dockerode";
import type { ContainerCreateOptions, ContainerInspectInfo } from "dockerode";
import type { HibernationMode } from "../desktops/hibernation.js";
import { containerImageReference } from "../desktops/image-reference.js";
import { displayOf, MIN_CONTAINER_MEMORY, positiveCpu, size } from "../desktops/limits.js";
import { needsMacHost } from "../desktops/macos.js";
import type {
  HibernatingRuntime,
  LogOptions,
  RuntimeImage,
  StopOutcome,
  WakeAddress,
} from "../desktops/runtime.js";
import { ContainerCage } from "../egress/container-cage.js";
import type { EgressService } from "../egress/egress-service.js";
import { networkModeOf, policyOf } from "../egress/policy.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { KeyedLock } from "../keyed-lock.js";
import { vmName } from "../names.js";
import type { CloneRequest, CreateRequest, RunRequest, StopRequest, UpdateRequest } from "../requests.js";
import { demuxLogs } from "./container-logs.js";
import {
  CONTAINER_LOCATION,
  type ContainerRecord,
  containerRecord,
  NOVNC_PORT,
  OSWORLD_PORT,
  SERVER_PORT,
} from "./container-record.js";
import { clearMark, PausedWatch, readMark, writeMark } from "./container-sleep.js";
import { type ContainerConfig, DesktopImages, runsHangarEntrypoint } from "./desktop-image.js";
import { connectEngine, type Engine, engineError, engineMessage, statusOf } from "./engine.js";
import { EngineEvents } from "./engine-events.js";
import {
  CONTAINER_PREFIX,
  checkContainerDesktopName,
  containerName,
  LABEL,
  REPLACEMENT_SUFFIX,
  STATE_REPOSITORY,
} from "./labels.js";
import { DEFAULT_PUBLISHED_PORTS, type PortRange, PublishedPorts } from "./published-ports.js";
import { DesktopSecrets, SECRETS_MOUNT } from "./secrets.js";
import { StartBoost } from "./start-boost.js";

/** A resource limit for the container's processes (`--ulimit nofile=10000:10000`). */
export interface Ulimit {
  name: string;
  soft: number;
  hard: number;
}

export interface ContainerRuntimeOptions {
  /** The engine's address (`unix:///path.sock`, `tcp://host:port`); default `DOCKER_HOST`, then the usual sockets. */
  engine?: string;
  /** The image a desktop runs when its request names none (default `hangar:latest`). */
  desktopImage?: string;
  /** Limits for the desktop's processes, set through the API (HostConfig.Ulimits). */
  ulimits?: Ulimit[];
  /** Give every desktop an API key of its own (its computer server in cloud mode). */
  desktopKeys?: boolean;
  /** How long `stop` waits for the desktop to end after SIGTERM before it is killed (default 10 s). */
  stopGraceMs?: number;
  /** Where desktops' secret files live on the host (a 0700 directory). */
  secretsDir: string;
  /** The checkout whose Dockerfile builds the desktop image (default: this package's, if any). */
  buildContext?: string;
  /** Cages desktops made with a network policy (egress/container-cage.ts); without: a policy is a 400. */
  egress?: EgressService;
  /** The loopback ports desktops' ports are published on (default 20000–29999), outside the ephemeral ones. */
  publishedPorts?: PortRange;
  /** The longest a starting desktop runs without its CPU limit when it is never seen ready (default 10 s). */
  startBoostMaxMs?: number;
}

export const DEFAULT_DESKTOP_IMAGE = "hangar:latest";
/** Starts tried before a desktop whose loopback ports keep being taken fails to start. */
const PORT_ATTEMPTS = 3;

/** What a container desktop is made of, as `makeContainer` takes it. */
interface DesktopSpec {
  name: string;
  image: string;
  /** The image the desktop was first made from (differs from `image` when that is a commit). */
  origin: string;
  cpu: number;
  memory: number;
  display: string;
  diskSize: number;
  stateImage?: string;
}

export class ContainerRuntime implements HibernatingRuntime {
  readonly kind = "container" as const;
  /** The engine's freezer (memory held) by default, or stopped with its files (container-sleep.ts). */
  readonly hibernation = { modes: ["paused", "disk"] } as const;
  readonly engine: Engine;
  readonly images: DesktopImages;
  private readonly secrets: DesktopSecrets;
  private readonly cage?: ContainerCage;
  private readonly ports: PublishedPorts;
  private readonly locks = new KeyedLock();
  private readonly starting = new Map<string, Promise<void>>();
  private readonly startErrors = new Map<string, string>();
  private readonly listeners: ((name: string) => void)[] = [];
  private readonly events: EngineEvents;
  /** False once the engine said it cannot limit a container's disk (overlay without xfs quotas). */
  private diskQuota = true;
  /** False once the engine said it has no update call for a container's limits (podman). */
  private liveUpdate = true;
  /** Paused desktops watched for waiting requests (only with the engine on this host). */
  private readonly paused: PausedWatch;
  /** A starting desktop's CPU limit, lifted until it is ready (start-boost.ts). */
  private readonly boost: StartBoost;
  private wakeRequest?: (name: string, why: string) => Promise<void>;

  constructor(
    private readonly options: ContainerRuntimeOptions,
    private readonly log: HostLog,
  ) {
    this.engine = connectEngine(options.engine);
    this.images = new DesktopImages(
      this.engine,
      containerImageReference(options.desktopImage ?? DEFAULT_DESKTOP_IMAGE),
      log,
      options.buildContext,
    );
    this.secrets = new DesktopSecrets(options.secretsDir);
    this.ports = new PublishedPorts(options.publishedPorts ?? DEFAULT_PUBLISHED_PORTS, () =>
      this.heldPorts(),
    );
    if (options.egress) this.cage = new ContainerCage(this.engine, options.egress, log);
    this.events = new EngineEvents(
      this.engine,
      (desktop) => this.changed(desktop),
      () => this.changed(""),
    );
    this.boost = new StartBoost(this.engine.docker, log, options.startBoostMaxMs);
    this.paused = new PausedWatch((name) => {
      this.wakeRequest?.(name, "a request waiting on its published port").catch((err: Error) =>
        this.log.error("A paused desktop could not be woken for a request", { vm: name, error: err.message }),
      );
    });
  }

  get defaultImage(): string {
    return this.images.desktopImage;
  }

  async hasImage(reference: string): Promise<boolean> {
    return this.images.has(containerImageReference(reference));
  }

  async pullImage(reference: string): Promise<void> {
    await this.images.pull(containerImageReference(reference));
  }

  /** The engine's tagged images (not the commits kept for clones), and those being pulled or built. */
  async listImages(): Promise<RuntimeImage[]> {
    let images: Dockerode.ImageInfo[];
    try {
      images = await this.engine.docker.listImages();
    } catch (err) {
      throw engineError(err, this.engine, "listing container images");
    }
    const listed: RuntimeImage[] = images.flatMap((image) =>
      (image.RepoTags ?? [])
        .filter((tag) => tag !== "<none>:<none>" && !tag.startsWith(`${STATE_REPOSITORY}:`))
        .map((tag) => ({
          repository: tag,
          imageId: image.Id.replace(/^sha256:/, "").slice(0, 12),
          kind: "container" as const,
          size: image.Size ?? null,
          created: image.Created ? new Date(image.Created * 1000).toISOString() : null,
        })),
    );
    for (const prep of this.images.status()) {
      listed.push({
        repository: prep.image,
        imageId: "",
        kind: "container",
        size: null,
        created: null,
        status: prep.state,
        progress: prep.progress,
        error: prep.error,
      });
    }
    return listed.sort((a, b) => a.repository.localeCompare(b.repository));
  }

  async list(storage?: string): Promise<ContainerRecord[]> {
    if (storage && storage !== CONTAINER_LOCATION) return [];
    let containers: Dockerode.ContainerInfo[];
    try {
      containers = await this.engine.docker.listContainers({
        all: true,
        filters: { label: [LABEL.desktop] },
      });
    } catch (err) {
      throw engineError(err, this.engine, "listing container desktops");
    }
    const names = containers
      .map((c) => c.Names[0]?.replace(/^\//, "") ?? "")
      .filter((n) => n.startsWith(CONTAINER_PREFIX) && !n.endsWith(REPLACEMENT_SUFFIX));
    const records = await Promise.all(
      names.map((n) => this.find(n.slice(CONTAINER_PREFIX.length)).catch(() => undefined)),
    );
    const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
    return records
      .filter((r): r is ContainerRecord => r !== undefined)
      .sort((a, b) => collator.compare(a.name, b.name));
  }

  async find(name: string, storage?: string): Promise<ContainerRecord | undefined> {
    if (storage && storage !== CONTAINER_LOCATION) return undefined;
    if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name)) return undefined;
    const info = await this.inspect(name);
    if (!info) return undefined;
    const cname = containerName(name);
    return containerRecord(info, {
      starting: this.starting.has(name),
      lastError: this.startErrors.get(name) ?? null,
      secrets: await this.secrets.read(cname),
      sleep: await readMark(this.secrets.dir(cname)),
    });
  }

  async create(request: CreateRequest & { name: string }) {
    const name = checkContainerDesktopName(vmName(request.name));
    const os = request.os.toLowerCase();
    if (os === "macos" || os === "darwin") throw needsMacHost("A macOS desktop");
    if (os !== "linux") {
      throw new HostError(
        "invalid_params",
        `Unsupported OS type: ${request.os} (a container desktop is linux)`,
      );
    }
    if (request.ipsw !== undefined) throw needsMacHost("An IPSW restore image (ipsw)");
    noLocation(request.storage);
    const mode = networkModeOf(request.network);
    if (mode !== undefined && mode !== "nat") {
      throw new HostError(
        "not_supported",
        `Network mode '${mode}' is not supported for container desktops: use 'nat' (the engine's bridge, ports published on loopback)`,
      );
    }
    const policy = policyOf(request.network);
    if (policy && !this.cage) {
      throw new HostError(
        "not_supported",
        "Network policies are not enforced for container desktops on this host",
      );
    }
    const spec: DesktopSpec = {
      name,
      image: containerImageReference(request.image ?? this.defaultImage),
      origin: request.image ?? this.defaultImage,
      cpu: positiveCpu(request.cpu),
      memory: size(request.memory, "memory", MIN_CONTAINER_MEMORY),
      display: displayOf(request.display),
      diskSize: size(request.diskSize, "diskSize", MIN_CONTAINER_MEMORY),
    };
    const image = await this.images.ensure(spec.image);
    await this.locks.run(name, async () => {
      if (policy) await this.cage?.remember(name, policy);
      try {
        await this.makeContainer(spec, Boolean(this.options.desktopKeys), userFor(image));
      } catch (err) {
        if (policy) await this.cage?.remove(name).catch(() => undefined);
        throw err;
      }
    });
    this.changed(name);
    await this.log.info("Container desktop created", {
      vm: name,
      image: spec.image,
      cpu: spec.cpu,
      memorySize: spec.memory,
    });
  }

  async remove(name: string) {
    await this.locks.run(name, async () => {
      const info = await this.inspectOrFail(name);
      await this.starting.get(name);
      this.paused.unwatch(name);
      this.boost.end(name);
      await this.removeContainer(info);
      await this.cage?.remove(name);
      this.startErrors.delete(name);
    });
    this.changed(name);
    await this.log.info("Container desktop deleted", { vm: name });
  }

  async clone(request: CloneRequest) {
    noLocation(request.sourceLocation);
    noLocation(request.destLocation);
    const newName = checkContainerDesktopName(vmName(request.newName));
    const sourceName = vmName(request.name);
    if (newName === sourceName) {
      throw new HostError("invalid_params", `Cannot clone ${sourceName} onto itself: choose another newName`);
    }
    await this.locks.run([sourceName, newName], async () => {
      const source = await this.inspectOrFail(sourceName);
      if (await this.inspect(newName)) throw alreadyExists(newName);
      const image = await this.commit(source);
      await this.cage?.copy(sourceName, newName);
      await this.makeContainer(
        { ...specOf(source, sourceName), name: newName, image, stateImage: image },
        source.Config.Labels?.[LABEL.keyed] === "1",
        // As its source runs.
        source.Config.User || undefined,
      );
    });
    this.changed(newName);
    await this.log.info("Container desktop cloned", { source: sourceName, destination: newName });
  }

  async update(name: string, request: UpdateRequest) {
    noLocation(request.storage);
    if (request.diskSize !== undefined) {
      throw new HostError(
        "not_supported",
        "diskSize cannot change for a container desktop: its writable layer's size is fixed when it is made " +
          "(and enforced only where the engine's storage has quotas, overlay on xfs with pquota)",
      );
    }
    if (request.display !== undefined) {
      throw new HostError(
        "not_supported",
        "display cannot change for a container desktop: it is set when it is made (create another, or clone and set it there)",
      );
    }
    const cpu = request.cpu === undefined ? undefined : positiveCpu(request.cpu);
    const memory =
      request.memory === undefined ? undefined : size(request.memory, "memory", MIN_CONTAINER_MEMORY);
    if (cpu === undefined && memory === undefined) return;
    await this.locks.run(name, async () => {
      const info = await this.inspectOrFail(name);
      const running = this.starting.has(name) || info.State.Running;
      if (this.liveUpdate && (await this.updateInPlace(info, cpu, memory))) return;
      if (running) {
        throw new HostError(
          "failed",
          `Cannot change the limits of ${name} while it runs: this engine cannot update a running container. Stop it first.`,
        );
      }
      await this.replace(info, name, {
        ...(cpu !== undefined && { cpu }),
        ...(memory !== undefined && { memory }),
      });
    });
    this.changed(name);
    await this.log.info("Container desktop settings updated", { vm: name, cpu, memorySize: memory });
  }

  async run(name: string, request: RunRequest): Promise<void> {
    if (request.recoveryMode) throw needsMacHost("Recovery mode (recoveryMode)");
    noLocation(request.storage);
    if (request.sharedDirectories && request.sharedDirectories.length > 0) {
      throw new HostError(
        "not_supported",
        "Shared directories are not supported for container desktops yet: a container's mounts are fixed when it is made",
      );
    }
    if (request.network !== undefined && request.network !== "nat") {
      throw new HostError(
        "not_supported",
        `Network mode '${request.network}' is not supported for container desktops (a network policy is set with PUT /svc/vms/${name}/network)`,
      );
    }
    await this.locks.run(name, async () => {
      const info = await this.inspectOrFail(name);
      if (this.starting.has(name) || info.State.Running) {
        throw new HostError("failed", `Virtual machine already running: ${name}`);
      }
      this.startErrors.delete(name);
      const started = this.start(name, info);
      this.starting.set(name, started);
      void started.finally(() => {
        this.starting.delete(name);
        this.changed(name);
      });
    });
    this.changed(name);
  }

  async stop(name: string, request: StopRequest = {}): Promise<StopOutcome> {
    noLocation(request.storage);
    const outcome = await this.locks.run(name, async () => {
      await this.starting.get(name);
      const info = await this.inspectOrFail(name);
      const secretsDir = this.secrets.dir(containerName(name));
      if (!info.State.Running) {
        // Asleep on disk: it is stopped already; it stays so, and is no longer asleep.
        if ((await readMark(secretsDir))?.mode === "disk") {
          await clearMark(secretsDir);
          return "quit";
        }
        throw new HostError("failed", `Virtual machine not running: ${name}`);
      }
      if (info.State.Paused) {
        this.paused.unwatch(name);
        await this.engine.docker
          .getContainer(info.Id)
          .unpause()
          .catch(() => undefined);
      }
      await clearMark(secretsDir);
      const graceMs = request.force
        ? 0
        : request.graceSeconds !== undefined
          ? request.graceSeconds * 1000
          : (this.options.stopGraceMs ?? 10_000);
      const container = this.engine.docker.getContainer(info.Id);
      this.boost.end(name);
      try {
        if (graceMs === 0) await container.kill();
        else await container.stop({ t: Math.max(1, Math.ceil(graceMs / 1000)) });
      } catch (err) {
        if (statusOf(err) !== 304) throw engineError(err, this.engine, `Stopping ${name}`);
      }
      const after = await this.inspectOrFail(name);
      return graceMs === 0 || after.State.ExitCode === 137 ? "killed" : "powered down";
    });
    this.changed(name);
    await this.log.info("Container desktop stopped", { vm: name, outcome });
    return outcome as StopOutcome;
  }

  /**
   * Puts a running desktop to sleep: `paused` (the freezer: CPU free, memory held) or `disk`
   * (stopped with its files; started again on resume). A desktop that does not run is a 409.
   */
  async hibernate(name: string, mode: HibernationMode) {
    if (mode !== "paused" && mode !== "disk") {
      throw new HostError(
        "invalid_params",
        `A container desktop hibernates 'paused' or on 'disk', not '${mode}' (CRIU cannot checkpoint on this host)`,
      );
    }
    const started = Date.now();
    await this.locks.run(name, async () => {
      await this.starting.get(name);
      const info = await this.inspectOrFail(name);
      const secretsDir = this.secrets.dir(containerName(name));
      const container = this.engine.docker.getContainer(info.Id);
      if (info.State.Paused || (!info.State.Running && (await readMark(secretsDir)))) {
        throw new HostError("conflict", `${name} is already hibernated`);
      }
      if (!info.State.Running) throw new HostError("conflict", `Cannot hibernate ${name}: it is not running`);
      if (mode === "paused") {
        try {
          await container.pause();
        } catch (err) {
          throw engineError(err, this.engine, `Pausing ${name}`);
        }
        await writeMark(secretsDir, "paused");
        await this.watchPaused(name);
        return;
      }
      // The mark first: a service killed during the stop finds the container stopped and marked.
      await writeMark(secretsDir, "disk");
      try {
        await container.stop({ t: Math.max(1, Math.ceil((this.options.stopGraceMs ?? 10_000) / 1000)) });
      } catch (err) {
        if (statusOf(err) !== 304) {
          await clearMark(secretsDir);
          throw engineError(err, this.engine, `Stopping ${name} to hibernate it`);
        }
      }
    });
    this.changed(name);
    await this.log.info("Container desktop hibernated", { vm: name, mode, ms: Date.now() - started });
  }

  /** Wakes a sleeping desktop: unpaused, or started again with its files (at the same ports on podman). */
  async resume(name: string, beforeStart?: () => Promise<void>) {
    const started = Date.now();
    await this.locks.run(name, async () => {
      const info = await this.inspectOrFail(name);
      const secretsDir = this.secrets.dir(containerName(name));
      const container = this.engine.docker.getContainer(info.Id);
      if (info.State.Paused) {
        this.paused.unwatch(name);
        try {
          await container.unpause();
        } catch (err) {
          throw engineError(err, this.engine, `Unpausing ${name}`);
        }
      } else if (info.State.Running || this.starting.has(name)) {
        throw new HostError("conflict", `Virtual machine already running: ${name} (nothing to resume)`);
      } else if ((await readMark(secretsDir))?.mode === "disk") {
        await beforeStart?.();
        try {
          await this.startContainer(name, info);
        } catch (err) {
          throw engineError(err, this.engine, `Starting ${name} again`);
        }
      } else {
        throw new HostError("conflict", `Cannot resume ${name}: it is not hibernated (run it instead)`);
      }
      await clearMark(secretsDir);
    });
    this.changed(name);
    await this.log.info("Container desktop resumed", { vm: name, ms: Date.now() - started });
  }

  /** A desktop asleep on disk is reached at its published ports, free while it is stopped. */
  async wakeAddresses(name: string): Promise<WakeAddress[]> {
    const record = await this.find(name);
    if (record?.hibernation !== "disk" || !record.forwardedPorts) return [];
    return Object.values(record.forwardedPorts).map((address) => {
      const colon = address.lastIndexOf(":");
      return {
        host: address.slice(0, colon).replace(/^\[|\]$/g, ""),
        port: Number(address.slice(colon + 1)),
      };
    });
  }

  onWakeRequest(wake: (name: string, why: string) => Promise<void>) {
    this.wakeRequest = wake;
  }

  /** Looks for requests waiting on a paused desktop's ports, where the engine runs on this host. */
  private async watchPaused(name: string) {
    if (!this.engine.address.startsWith("unix://")) return;
    const info = await this.inspect(name);
    if (!info?.State.Paused) return;
    const ports = [SERVER_PORT, NOVNC_PORT, OSWORLD_PORT].map((p) => Number.parseInt(p, 10));
    this.paused.watch(name, info.State.Pid, ports);
  }

  /** The container's output, as `docker logs [-f] [-n N]` shows it. */
  async logs(name: string, options: LogOptions): Promise<Readable> {
    const info = await this.inspectOrFail(name);
    const container = this.engine.docker.getContainer(info.Id);
    const common = {
      stdout: true,
      stderr: true,
      ...(options.lines !== undefined && { tail: options.lines }),
    };
    try {
      const source = options.follow
        ? await container.logs({ ...common, follow: true })
        : await container.logs({ ...common, follow: false });
      return demuxLogs(source, options.signal);
    } catch (err) {
      throw engineError(err, this.engine, `Reading the logs of ${name}`);
    }
  }

  /**
   * Puts right what a killed service left: a replacement container that did not take its name
   * yet takes it (or is removed when the old one is still there), and secret directories of
   * containers that no longer exist are removed. The engine's events are followed from now on.
   */
  async recover() {
    this.events.start();
    let containers: Dockerode.ContainerInfo[];
    try {
      containers = await this.engine.docker.listContainers({
        all: true,
        filters: { label: [LABEL.desktop] },
      });
    } catch (err) {
      throw engineError(err, this.engine, "listing container desktops");
    }
    const names = new Set(containers.map((c) => c.Names[0]?.replace(/^\//, "") ?? ""));
    for (const cname of names) {
      if (!cname.endsWith(REPLACEMENT_SUFFIX)) continue;
      const target = cname.slice(0, -REPLACEMENT_SUFFIX.length);
      const container = this.engine.docker.getContainer(cname);
      if (names.has(target)) await container.remove({ force: true, v: true }).catch(() => undefined);
      else
        await container.rename({ name: target }).then(
          () => names.add(target),
          () => undefined,
        );
    }
    await this.secrets.sweep(names);
    // Asleep: paused ones are watched for requests; a mark left on a running one is stale.
    for (const info of containers) {
      const name = info.Labels?.[LABEL.desktop];
      if (!name) continue;
      const secretsDir = this.secrets.dir(containerName(name));
      if (info.State === "paused") await this.watchPaused(name);
      else if (info.State === "running") await clearMark(secretsDir);
    }
    const running = containers.filter(
      (c) => c.State === "running" && c.Labels?.[LABEL.desktop] !== undefined,
    );
    // A desktop whose start a killed service had lifted the CPU limit of gets it back.
    const limits = await Promise.all(
      running.map((c) =>
        this.engine.docker
          .getContainer(c.Id)
          .inspect()
          .then(
            (info) => ({ id: c.Id, nanoCpus: info.HostConfig?.NanoCpus ?? 0 }),
            () => ({ id: c.Id, nanoCpus: 0 }),
          ),
      ),
    );
    await this.boost.restoreAll(limits);
    await this.cage?.recover(running.map((c) => c.Labels?.[LABEL.desktop] as string));
  }

  async settled() {
    await Promise.all([...this.starting.values()]);
  }

  /** Desktop `name` answered after its start: its CPU limit is put back. */
  ready(name: string) {
    void this.boost.restore(name);
  }

  async close() {
    await this.settled();
    this.boost.close();
    this.paused.stop();
    await this.events.close();
    await this.cage?.close();
  }

  onChange(listener: (name: string) => void) {
    this.listeners.push(listener);
  }

  // ---- the engine's containers ----

  private changed(name: string) {
    for (const listener of this.listeners) listener(name);
  }

  /** The container of desktop `name`, or undefined when the engine has none that Hangar made. */
  private async inspect(name: string): Promise<ContainerInspectInfo | undefined> {
    try {
      const info = await this.engine.docker.getContainer(containerName(name)).inspect();
      return info.Config.Labels?.[LABEL.desktop] === name ? info : undefined;
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw engineError(err, this.engine, `looking for container desktop ${name}`);
    }
  }

  private async inspectOrFail(name: string): Promise<ContainerInspectInfo> {
    const info = await this.inspect(name);
    if (!info) throw new HostError("not_found", `Virtual machine not found: ${name}`);
    return info;
  }

  private async start(name: string, info: ContainerInspectInfo) {
    try {
      await this.cage?.beforeStart(name);
      const started = await this.startContainer(name, info);
      await this.boost.lift(name, started.Id, started.HostConfig?.NanoCpus ?? 0);
      await this.cage?.afterStart(name);
      await this.log.info("Container desktop started", { vm: name, container: info.Id.slice(0, 12) });
    } catch (err) {
      let message = engineMessage(err);
      if (/rlimit/i.test(message)) {
        message +=
          " (this host does not let the container raise its limits: give the limits it allows, e.g. " +
          "--container-ulimit nofile=10000:10000 --container-ulimit nproc=10000:10000)";
      }
      const failure = engineError(err, this.engine, `Starting ${name}`);
      const text = failure.kind === "unavailable" ? failure.message : message;
      this.startErrors.set(name, `${new Date().toISOString()} ${text}`);
      await this.log.error("Container desktop failed to start", { vm: name, error: text });
    }
  }

  /**
   * Starts the container. Its loopback ports are chosen when it is made (published-ports.ts) and the
   * engine binds them only when it starts: one taken meanwhile by another program is a failure to start, so the
   * container is made again (its writable layer kept) with new ports, up to PORT_ATTEMPTS times.
   */
  private async startContainer(name: string, info: ContainerInspectInfo): Promise<ContainerInspectInfo> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.engine.docker.getContainer(info.Id).start();
        return info;
      } catch (err) {
        const message = engineMessage(err);
        if (attempt >= PORT_ATTEMPTS || !/address already in use/i.test(message)) throw err;
        await this.log.info("A port of the container desktop was taken; making it again with new ports", {
          vm: name,
          error: message,
        });
        await this.replace(info, name, {}, "with new ports");
        info = await this.inspectOrFail(name);
      }
    }
  }

  /**
   * Makes the container (stopped), with secrets of its own (a new VNC password; a new key when
   * `keyed`), run as `user` (the image's own when undefined).
   */
  private async makeContainer(spec: DesktopSpec, keyed: boolean, user: string | undefined) {
    const cname = containerName(spec.name);
    const caged = (await this.cage?.containerSettings(spec.name)) ?? { Env: [], Binds: [] };
    // Run as root (Hangar's image), its secrets are root's alone in it.
    const secretsDir = await this.secrets.make(cname, keyed, user === "0");
    try {
      await this.createContainer(cname, spec, keyed, secretsDir, caged, user);
    } catch (err) {
      await this.secrets.remove(cname);
      if (statusOf(err) === 409) throw alreadyExists(spec.name, true);
      throw engineError(err, this.engine, `Creating container desktop ${spec.name}`);
    }
  }

  private async createContainer(
    cname: string,
    spec: DesktopSpec,
    keyed: boolean,
    secretsDir: string,
    caged: Awaited<ReturnType<ContainerCage["containerSettings"]>>,
    user: string | undefined,
  ) {
    const [server, novnc, osworld] = await this.ports.pick(3);
    const loopback = (port: number) => [{ HostIp: "127.0.0.1", HostPort: String(port) }];
    const options: ContainerCreateOptions = {
      name: cname,
      Image: spec.image,
      Labels: {
        [LABEL.desktop]: spec.name,
        [LABEL.display]: spec.display,
        [LABEL.diskSize]: String(spec.diskSize),
        [LABEL.image]: spec.origin,
        ...(spec.stateImage && { [LABEL.stateImage]: spec.stateImage }),
        ...(keyed && { [LABEL.keyed]: "1" }),
      },
      Env: [
        `HANGAR_DISPLAY=${spec.display}`,
        `CONTAINER_NAME=${spec.name}`,
        "HANGAR_VNC=1",
        `HANGAR_VNC_PASSWORD_FILE=${SECRETS_MOUNT}/vnc-password`,
        ...caged.Env,
      ],
      // With a key, the computer server asks for it over plain HTTP: its port is published on loopback only.
      Cmd: keyed ? ["--insecure-http"] : [],
      ...(user && { User: user }),
      ExposedPorts: { [SERVER_PORT]: {}, [NOVNC_PORT]: {}, [OSWORLD_PORT]: {} },
      // Readiness is the host service's own probe; the image's HEALTHCHECK would need systemd timers under podman.
      Healthcheck: { Test: ["NONE"] },
      HostConfig: {
        Memory: spec.memory,
        NanoCpus: Math.round(spec.cpu * 1e9),
        PortBindings: {
          [SERVER_PORT]: loopback(server),
          [NOVNC_PORT]: loopback(novnc),
          [OSWORLD_PORT]: loopback(osworld),
        },
        Binds: [`${secretsDir}:${SECRETS_MOUNT}:ro`, ...caged.Binds],
        Ulimits: (this.options.ulimits ?? []).map((u) => ({ Name: u.name, Soft: u.soft, Hard: u.hard })),
        ...(this.diskQuota && { StorageOpt: { size: String(spec.diskSize) } }),
        ...caged.HostConfig,
      },
    };
    try {
      await this.engine.docker.createContainer(options);
    } catch (err) {
      const withQuota = options.HostConfig?.StorageOpt !== undefined;
      if (!withQuota || !/storage-opt|storage_opt|quota|StorageOpt/i.test(engineMessage(err))) throw err;
      // Overlay without xfs project quotas cannot limit a container's disk: made without a limit.
      if (this.diskQuota) {
        this.diskQuota = false;
        await this.log.info(
          "The container engine cannot limit a container's disk; diskSize is recorded only",
          {
            engine: this.engine.address,
            reason: engineMessage(err),
          },
        );
      }
      delete options.HostConfig?.StorageOpt;
      await this.engine.docker.createContainer(options);
    }
  }

  /** The host ports every container of the engine publishes, running or not. */
  private async heldPorts(): Promise<Set<number>> {
    const containers = await this.engine.docker.listContainers({ all: true });
    return new Set(containers.flatMap((c) => (c.Ports ?? []).map((p) => p.PublicPort).filter((p) => p > 0)));
  }

  private async removeContainer(info: ContainerInspectInfo) {
    const cname = info.Name.replace(/^\//, "");
    try {
      await this.engine.docker.getContainer(info.Id).remove({ force: true, v: true });
    } catch (err) {
      if (statusOf(err) !== 404) throw engineError(err, this.engine, `Deleting ${cname}`);
    }
    await this.secrets.remove(cname);
    const stateImage = info.Config.Labels?.[LABEL.stateImage];
    // Kept while another container (a clone of it) still runs it.
    if (stateImage)
      await this.engine.docker
        .getImage(stateImage)
        .remove()
        .catch(() => undefined);
  }

  /** The engine's live update of cpu and memory; false when it has no such call (podman). */
  private async updateInPlace(info: ContainerInspectInfo, cpu?: number, memory?: number): Promise<boolean> {
    try {
      await this.engine.docker.getContainer(info.Id).update({
        ...(cpu !== undefined && { NanoCpus: Math.round(cpu * 1e9) }),
        ...(memory !== undefined && { Memory: memory, MemorySwap: -1 }),
      });
      return true;
    } catch (err) {
      if (statusOf(err) === 404 && (await this.inspect(info.Config.Labels?.[LABEL.desktop] ?? ""))) {
        this.liveUpdate = false;
        return false;
      }
      throw engineError(err, this.engine, "Updating the container's limits");
    }
  }

  /**
   * A new container for a stopped desktop with other limits, from a commit of the old one (its
   * files are kept): made under a temporary name, the old one removed, the new one renamed. A
   * service killed on the way leaves a replacement that `recover` completes.
   */
  private async replace(
    info: ContainerInspectInfo,
    name: string,
    change: { cpu?: number; memory?: number },
    why = "with new limits",
  ) {
    const image = await this.commit(info);
    const temp = `${name}${REPLACEMENT_SUFFIX}`;
    const spec = { ...specOf(info, name), ...change, image, stateImage: image };
    const cname = containerName(name);
    const secretsDir = this.secrets.dir(cname);
    const oldStateImage = info.Config.Labels?.[LABEL.stateImage];
    try {
      await this.createContainer(
        containerName(temp),
        { ...spec, name },
        info.Config.Labels?.[LABEL.keyed] === "1",
        secretsDir,
        (await this.cage?.containerSettings(name)) ?? { Env: [], Binds: [] },
        // As the desktop ran: its secrets' modes are made for that user.
        info.Config.User || undefined,
      );
    } catch (err) {
      throw engineError(err, this.engine, `Recreating ${name} ${why}`);
    }
    try {
      await this.engine.docker.getContainer(info.Id).remove({ force: true, v: true });
      await this.engine.docker.getContainer(containerName(temp)).rename({ name: cname });
    } catch (err) {
      throw engineError(err, this.engine, `Recreating ${name} ${why}`);
    }
    if (oldStateImage && oldStateImage !== image) {
      await this.engine.docker
        .getImage(oldStateImage)
        .remove()
        .catch(() => undefined);
    }
  }

  /**
   * The container's writable layer as an image (`docker commit`), to make other containers from.
   * A stopped container committed before (same container, same stop) is not committed again.
   */
  private async commit(info: ContainerInspectInfo): Promise<string> {
    const source = `${info.Id}@${info.State.Running ? randomBytes(4).toString("hex") : info.State.FinishedAt}`;
    try {
      const found = await this.engine.docker.listImages({
        filters: { label: [`${LABEL.source}=${source}`] },
      });
      const tag = found[0]?.RepoTags?.find((t) => t.startsWith(`${STATE_REPOSITORY}:`));
      if (tag) return tag;
      const tagName = `${(info.Config.Labels?.[LABEL.desktop] ?? "desktop").replace(/[^\w.-]/g, "_").slice(0, 100)}-${randomBytes(4).toString("hex")}`;
      await this.engine.docker.getContainer(info.Id).commit({
        repo: STATE_REPOSITORY,
        tag: tagName,
        pause: true,
        changes: [`LABEL ${LABEL.source}=${source}`],
      });
      return `${STATE_REPOSITORY}:${tagName}`;
    } catch (err) {
      throw engineError(err, this.engine, "Saving the desktop's files (commit)");
    }
  }
}

/** What a container was made with, to make another like it. */
function specOf(info: ContainerInspectInfo, name: string): DesktopSpec {
  const labels = info.Config.Labels ?? {};
  const nano = info.HostConfig.NanoCpus ?? 0;
  return {
    name,
    image: info.Config.Image,
    origin: labels[LABEL.image] ?? info.Config.Image,
    cpu: nano > 0 ? nano / 1e9 : 1,
    memory: info.HostConfig.Memory ?? 0,
    display: labels[LABEL.display] ?? "1280x800",
    diskSize: Number(labels[LABEL.diskSize] ?? 0),
  };
}

function noLocation(storage: string | undefined) {
  if (storage && storage !== CONTAINER_LOCATION) {
    throw new HostError(
      "invalid_params",
      `Container desktops have no storage location ('${storage}'): leave storage out (or use '${CONTAINER_LOCATION}')`,
    );
  }
}

function alreadyExists(name: string, engine = false) {
  return new HostError(
    "failed",
    engine
      ? `Virtual machine already exists with name: ${name} (the engine has a container named ${containerName(name)})`
      : `Virtual machine already exists with name: ${name}`,
  );
}

/**
 * Hangar's own image is started as root: its entry point keeps the computer server root and runs
 * everything the agent starts (processes, files, desktop, browser) as its desktop user, so the
 * agent cannot signal, trace or read the server or its keys (src/container/main.ts, docs/egress.md).
 * Another image runs as its own user (undefined).
 */
function userFor(image: ContainerConfig): string | undefined {
  return runsHangarEntrypoint(image) ? "0" : undefined;
}
