/**
 * What runs desktops for the host service. The VM service (desktop-service.ts) keeps no desktops of its
 * own: it routes each request to the runtime that backs the desktop named in it. QEMU is one
 * runtime (a desktop is a VM directory and a QEMU process); containers (an engine's container) and
 * Kubernetes (a Pod) are others. Each runtime owns its records: where they live (a directory, the
 * engine's labels, the cluster's objects) is its own business, so a runtime whose records are in a
 * shared place (a cluster) is seen alike by every host service that uses it.
 *
 * A runtime answers in lume's shapes (the record of `GET /svc/vms/:name`, the errors of
 * `HostError`); the routes never know which runtime answered.
 */
import type { Readable } from "node:stream";
import type { CloneRequest, CreateRequest, RunRequest, StopRequest, UpdateRequest } from "../requests.js";
import type { DesktopDetails } from "./desktop-details.js";
import type { HibernationCapability, HibernationMode, HibernationState } from "./hibernation.js";
import type { RuntimeKind } from "./kinds.js";

export { RUNTIME_KINDS, type RuntimeKind } from "./kinds.js";

/** How a stop ended: the guest powered down, its process was asked to quit, or it was killed. */
export type StopOutcome = "powered down" | "quit" | "killed";

/**
 * A desktop as its runtime sees it: lume's record plus the runtime's name and when the desktop was
 * last started. Readiness (`ready`, `readyAt`, `startMs`) is added by the VM service.
 */
export type RuntimeRecord = DesktopDetails &
  Partial<HibernationState> & {
    runtime: RuntimeKind;
    /** When the desktop was last started (ISO 8601), while it runs; null when stopped. */
    startedAt: string | null;
    /**
     * Set by a runtime that knows readiness better than a probe of the computer server (a Pod's
     * readiness condition); left out, the VM service probes `computerServerUrl` itself.
     */
    ready?: boolean;
    /**
     * The key of this desktop's computer server, where the service gives desktops keys of their
     * own (cloud mode): a client sends it as `X-API-Key`. Absent where the desktop needs none.
     */
    apiKey?: string;
  };

/** What `logs` streams: the desktop's console (a VM's serial port, a container's or Pod's output). */
export interface LogOptions {
  /** The last N lines only (all when undefined). */
  lines?: number;
  /** Keep the stream open and send what comes, like `docker logs -f`, until `signal` aborts. */
  follow?: boolean;
  signal: AbortSignal;
}

/** The desktop runtime interface: every lume route, answered for the desktops this runtime backs. */
export interface DesktopRuntime {
  readonly kind: RuntimeKind;
  /** Every desktop of this runtime; `storage` filters by location where the runtime has locations. */
  list(storage?: string): Promise<RuntimeRecord[]>;
  /** The desktop's record, or undefined when this runtime has no desktop of that name. */
  find(name: string, storage?: string): Promise<RuntimeRecord | undefined>;
  /** Creates a stopped desktop; the name is already checked and free in every runtime. */
  create(request: CreateRequest & { name: string }): Promise<void>;
  remove(name: string, storage?: string): Promise<void>;
  /** A stopped copy under `newName`, which is already checked and free in every runtime. */
  clone(request: CloneRequest): Promise<void>;
  update(name: string, request: UpdateRequest): Promise<void>;
  /** Checks what can be checked at once and starts the desktop in the background. */
  run(name: string, request: RunRequest): Promise<void>;
  /** Stops the desktop and resolves once it has stopped. */
  stop(name: string, request: StopRequest): Promise<StopOutcome>;
  /** The desktop's console output; a clear `HostError` where the runtime keeps none. */
  logs(name: string, options: LogOptions): Promise<Readable>;
  /** Puts right what a killed service left (half-created desktops, half-written state); once at start. */
  recover(): Promise<void>;
  /** Waits for the starts and background work in progress (tests and shutdown). */
  settled(): Promise<void>;
  /** Lets go of connections and watches; the desktops keep running. */
  close(): Promise<void>;
  /** Told by the runtime's owner when a desktop first answered after a start. */
  ready?(name: string): void;
  /** Called by the runtime's owner to learn of changes (a desktop started, stopped, vanished). */
  onChange?(listener: (name: string) => void): void;
  /**
   * Where desktops are made from images (containers, Pods): the image a desktop gets when its
   * request names none. Undefined where desktops are made otherwise (QEMU: a disk).
   */
  readonly defaultImage?: string;
  /**
   * Whether an image is there to make desktops from (present, not pulled by this call); a clear
   * `HostError` for a malformed reference. Absent where desktops are not made from images.
   */
  hasImage?(reference: string): Promise<boolean>;
  /** Pulls an image to make desktops from (`POST /svc/pull` with this runtime). */
  pullImage?(reference: string): Promise<void>;
  /** The images desktops can be made from, for `GET /svc/images` beside the VM images. */
  listImages?(): Promise<RuntimeImage[]>;
  /**
   * Declared by a runtime whose `find` reads the host's own files (QEMU's VM directories): a look
   * at a desktop costs no engine or cluster call, so a claim may look rather than ask the desktop.
   */
  readonly localRecords?: boolean;
  /** Declared by a runtime that has snapshots (`SnapshottingRuntime`, `canSnapshot`). */
  readonly snapshots?: SnapshotCapability;
  /** Declared by a runtime that can hibernate desktops (`HibernatingRuntime`, `canHibernate`). */
  readonly hibernation?: HibernationCapability;
}

/** What a runtime's snapshots keep of a running desktop. */
export interface SnapshotCapability {
  /** `memory`: its whole running state (RAM, devices, disk); `disk`: its files only. */
  running: "memory" | "disk";
}

/** A runtime whose desktops have snapshots (docs/host.md): restored, and forked into new desktops. */
export interface SnapshottingRuntime extends DesktopRuntime {
  readonly snapshots: SnapshotCapability;
  /** The desktop's whole state when it runs (its disk when stopped), under `snapshot`. */
  snapshot(name: string, snapshot: string): Promise<SnapshotRecord>;
  listSnapshots(name: string): Promise<SnapshotRecord[]>;
  deleteSnapshot(name: string, snapshot: string): Promise<void>;
  /** Puts the desktop back in the snapshot's state; resolves once it runs (or, disk only, is stopped). */
  restore(name: string, snapshot: string): Promise<void>;
  /** New desktops started from the snapshot; `names` are checked and free in every runtime. */
  fork(name: string, snapshot: string, names: string[]): Promise<void>;
}

export function canSnapshot(runtime: DesktopRuntime): runtime is SnapshottingRuntime {
  return runtime.snapshots !== undefined;
}

/** A runtime whose desktops can hibernate and resume (desktops/hibernation.ts). */
export interface HibernatingRuntime extends DesktopRuntime {
  readonly hibernation: HibernationCapability;
  /**
   * Puts a running desktop to sleep in `mode` (one of the capability's); resolves once it sleeps.
   * A desktop that does not run is a `conflict`; a failure leaves it running, said plainly.
   * `asleep`, when the runtime calls it, is called as soon as the desktop sleeps and its ports are
   * free, before work that follows within the call (the service listens there for it then, so that
   * nothing else takes them meanwhile).
   */
  hibernate(name: string, mode: HibernationMode, asleep?: () => Promise<void>): Promise<void>;
  /**
   * Wakes a hibernated desktop; resolves once it runs (readiness is the VM service's).
   * `beforeStart` is called just before the desktop takes its ports again (the service stops
   * listening there for it then).
   */
  resume(name: string, beforeStart?: () => Promise<void>): Promise<void>;
  /**
   * The host addresses that reach the desktop while it sleeps and that nothing else holds then:
   * the VM service listens there, so that a connection wakes it. Empty where the runtime watches
   * for requests itself (and calls the hook given to `onWakeRequest`) or cannot.
   */
  wakeAddresses(name: string): Promise<WakeAddress[]>;
  /**
   * Given the function that wakes a desktop (resolves once it is awake and ready), by a runtime
   * that notices requests to sleeping desktops itself.
   */
  onWakeRequest?(wake: (name: string, why: string) => Promise<void>): void;
}

/** A host address (IPv4 or a name) and port a sleeping desktop is reached at. */
export interface WakeAddress {
  host: string;
  port: number;
}

export function canHibernate(runtime: DesktopRuntime): runtime is HibernatingRuntime {
  return runtime.hibernation !== undefined;
}

/** A snapshot of a desktop, as `GET /svc/vms/:name/snapshots` lists it. */
export interface SnapshotRecord {
  name: string;
  vm: string;
  createdAt: string;
  /** True: the running desktop's whole state (RAM, devices, disk); false: its disk only. */
  memory: boolean;
  /** Bytes its files take on disk. */
  bytes: number;
}

/** An image a runtime makes desktops from, as `GET /svc/images` lists it. */
export interface RuntimeImage {
  /** `registry/name:tag`. */
  repository: string;
  imageId: string;
  kind: RuntimeKind;
  /** Bytes, as the engine counts them. */
  size: number | null;
  created: string | null;
  /** While the image is being made ready: `pulling`/`building` with its progress, or `failed`. */
  status?: "pulling" | "building" | "failed";
  progress?: string;
  error?: string | null;
}
