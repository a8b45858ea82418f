/**
 * Starts the host service: settings, log, VM service, HTTP app, listening on loopback by default.
 * Used by `hangar host serve` and by the tests (port 0, temporary config and home directories).
 * Closing it leaves the VMs running; a new service finds them again.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { closeServer, listening } from "../common/listen.js";
import { type Logger, silentLogger } from "../common/logger.js";
import { isLoopbackName, OriginPolicy } from "../common/origin-policy.js";
import { LazyWebSocketServer } from "../common/ws-server.js";
import { createHostApp } from "./app.js";
import { ContainerRuntime, type Ulimit } from "./container/container-runtime.js";
import { DOCKER_SOCKET, PODMAN_SOCKET } from "./container/engine.js";
import type { PortRange } from "./container/published-ports.js";
import { parseUlimit } from "./container/ulimits.js";
import { DesktopService } from "./desktops/desktop-service.js";
import type { DesktopRuntime, RuntimeKind } from "./desktops/runtime.js";
import type { E2bOptions, RunningE2bService } from "./e2b/service.js";
import { EgressService } from "./egress/egress-service.js";
import { EgressTimelineFeed } from "./egress/timeline-feed.js";
import { LifecycleEvents } from "./events.js";
import { HostLog } from "./host-log.js";
import { ImageService } from "./images/image-service.js";
import { ConfigMapPoolStore } from "./kubernetes/configmap-pool-store.js";
import { KubernetesRuntime, type KubernetesRuntimeOptions } from "./kubernetes/kubernetes-runtime.js";
import { LeaderLease } from "./kubernetes/leader-lease.js";
import { hostMetrics } from "./metrics.js";
import { FilePoolStore } from "./pools/file-pool-store.js";
import { PoolManager, type PoolManagerOptions } from "./pools/pool-manager.js";
import type { PoolStore } from "./pools/pool-store.js";
import { DEFAULT_HOST_PORT } from "./port.js";
import { acceleratorSettled, detectAccelerator } from "./qemu/accel.js";
import { QemuRuntime, type QemuRuntimeOptions } from "./qemu/qemu-runtime.js";
import { VmStore } from "./qemu/vm-store.js";
import type { HostServices } from "./services.js";
import { type SettingsOptions, SettingsStore } from "./settings.js";
import { IdleWatcher } from "./sleep/idle-watcher.js";
import type { LifecycleEvent } from "./sleep/lifecycle.js";
import { type WebhookOptions, Webhooks } from "./webhooks.js";

export interface HostServiceOptions extends SettingsOptions, QemuRuntimeOptions {
  host?: string;
  port?: number;
  log?: Logger;
  /** Every route needs `Authorization: Bearer <token>` (`--token-file`, `HANGAR_HOST_TOKEN`). */
  token?: string;
  /** Listen beyond loopback without a token (`--no-auth`): anyone who can connect manages the VMs. */
  noAuth?: boolean;
  /** Web pages (origins) allowed to use the service from a browser; `*` only with a token. */
  allowOrigins?: string[];
  /** Host names accepted in `Host` besides loopback ones (see origin-policy.ts). */
  allowHosts?: string[];
  /** Where a new desktop runs when its request names no runtime (default `qemu`). */
  defaultRuntime?: RuntimeKind;
  /**
   * Container desktops: the engine's address (`unix:///path.sock`; default `DOCKER_HOST`, then
   * Docker's or podman's socket when there is one; `false` turns containers off), the desktop image,
   * limits for the desktops' processes, and a key of its own for every desktop.
   */
  containerEngine?: string | false;
  desktopImage?: string;
  containerUlimits?: Ulimit[];
  /** The loopback ports container desktops are published on (default 20000–29999). */
  containerPorts?: PortRange;
  /** The longest a starting container desktop runs without its CPU limit if never seen ready (default 10 s). */
  containerStartBoostMaxMs?: number;
  desktopKeys?: boolean;
  /**
   * Kubernetes desktops (a Pod each): on when the default runtime is `kubernetes` or a kubeconfig
   * or namespace is given (`--kubeconfig`, `--namespace`; else KUBECONFIG, ~/.kube/config, in-cluster).
   */
  kubernetes?: Pick<KubernetesRuntimeOptions, "kubeconfig" | "namespace" | "reach" | "podSecurity"> & {
    /**
     * Keep the pools in a ConfigMap of the namespace instead of a file (`--pools-in-cluster`); the
     * replicas sharing it elect, through a Lease, the one that refills them.
     */
    poolsInCluster?: boolean;
    /** How long the leader Lease lasts unless renewed (default 15 s; `--lease-duration`). */
    leaseDurationSeconds?: number;
  };
  /** Lifecycle events are posted to these URLs (`--webhook`, `--webhook-secret-file`). */
  webhooks?: WebhookOptions;
  /** DNS servers the egress proxy resolves desktops' names with (`--egress-resolver`; default the host's). */
  egressResolvers?: string[];
  /** More CAs (PEM) servers' certificates may be signed by, where the proxy adds credentials (`--egress-trust`). */
  egressTrust?: string[];
  /** Where the cluster's Pods reach this service's egress gates (`--egress-gate`): caged Kubernetes desktops. */
  egressGate?: string;
  /** Where the pools are kept (default: a file, `<home>/.pools/pools.json`). */
  poolStore?: PoolStore;
  pools?: PoolManagerOptions;
  /** E2B's protocol on a listener of its own (`--e2b-port`, docs/e2b.md); off when absent. */
  e2b?: E2bOptions;
}

export interface RunningHostService {
  readonly url: string;
  readonly port: number;
  readonly services: HostServices;
  /** The E2B listener, when `e2b` was given. */
  readonly e2b?: RunningE2bService;
  close(): Promise<void>;
}

export async function startHostService(options: HostServiceOptions = {}): Promise<RunningHostService> {
  const logger = options.log ?? silentLogger;
  const host = options.host ?? "127.0.0.1";
  const token = checkedToken(options.token);
  if (!token && !isLoopbackName(host)) {
    if (!options.noAuth) {
      throw new Error(
        `listening on ${host} without a token would let anyone who can connect manage the VMs: ` +
          "give one with --token-file FILE (or HANGAR_HOST_TOKEN), e.g. made by `openssl rand -hex 32`, " +
          "or pass --no-auth if the network is yours alone",
      );
    }
    logger.warn(
      { host },
      "NO AUTHENTICATION: anyone who can reach this address can create, run and delete VMs",
    );
  }
  const originPolicy = new OriginPolicy({
    listenHost: host,
    allowOrigins: options.allowOrigins,
    allowHosts: options.allowHosts,
    authenticated: Boolean(token),
  });
  const settings = new SettingsStore(options);
  await settings.read();
  const log = new HostLog(async () => join(await settings.homeDirectory(), ".logs"), logger);
  // The composition root: every service is built here, and handed what it needs.
  const store = new VmStore(settings);
  const egress = new EgressService(async () => join(await settings.homeDirectory(), ".egress"), log, {
    resolvers: options.egressResolvers,
    upstreamCa: options.egressTrust,
  });
  await egress.load();
  const images = new ImageService({
    settings,
    store,
    log,
    isRunning: (vm): Promise<boolean> => qemu.isRunning(vm),
  });
  const qemu = new QemuRuntime(settings, store, log, images, options, egress);
  const runtimes: DesktopRuntime[] = [qemu];
  const containers = await containerRuntime(options, settings, log, egress);
  if (containers) runtimes.push(containers);
  let kubernetes: KubernetesRuntime | undefined;
  if (options.kubernetes || options.defaultRuntime === "kubernetes") {
    kubernetes = new KubernetesRuntime(
      {
        ...options.kubernetes,
        desktopImage: options.desktopImage,
        desktopKeys: options.desktopKeys,
        stopGraceMs: options.stopGraceMs,
        egress,
        egressGate: options.egressGate,
      },
      log,
    );
    runtimes.push(kubernetes);
  }
  const vms = new DesktopService(runtimes, options.defaultRuntime ?? "qemu", images, log);
  const events = new LifecycleEvents();
  vms.lifecycle.on((transition) => events.emit(...operatorEvent(transition)));
  vms.addToRecords((record) => ({ network: egress.record(record.name, record.runtime) }));
  // Each egress decision in its desktop's own timeline, beside the commands (egress/timeline-feed.ts).
  const egressFeed = new EgressTimelineFeed(egress.audit, (name) => vms.find(name), log);
  const shared = kubernetes && options.kubernetes?.poolsInCluster && !options.poolStore;
  const poolStore =
    options.poolStore ??
    (shared && kubernetes
      ? new ConfigMapPoolStore(kubernetes.cluster)
      : new FilePoolStore(join(await settings.homeDirectory(), ".pools", "pools.json")));
  const pools = new PoolManager(vms, poolStore, log, { ...options.pools, shared: Boolean(shared) }, events);
  const lease =
    shared && kubernetes
      ? new LeaderLease(kubernetes.cluster, pools, log, {
          durationSeconds: options.kubernetes?.leaseDurationSeconds,
        })
      : undefined;
  // Auto-pause: desktops with an idle timeout (their own, or their pool's while claimed) sleep when idle.
  const idle = new IdleWatcher(
    {
      find: (name) => vms.find(name),
      hibernate: (name, why, mode) => vms.hibernate(name, mode, why),
      lifecycle: vms.lifecycle,
    },
    async () => join(await settings.homeDirectory(), ".idle", "timeouts.json"),
    log,
    () => pools.claimedIdleTimeouts(),
  );
  vms.addToRecords((record) => ({
    idleTimeout: idle.timeoutOf(record.name),
    idleMode: idle.modeOf(record.name),
  }));
  const services: HostServices = { settings, vms, pools, images, log, events, egress, idle };
  const metrics = hostMetrics(services, events);
  const webhooks = options.webhooks?.urls.length ? new Webhooks(events, options.webhooks, log) : undefined;
  await vms.recover();
  await images.recover();
  await pools.start();
  await idle.start();
  await lease?.start();
  void detectAccelerator(); // probe once now, so the first run does not wait for it

  const app = createHostApp(services, { log: logger, originPolicy, token, metrics: metrics.registry });
  // The page's VNC view (`WS /vnc/{name}`); its frames are small, the VNC protocol's own.
  const sockets = new LazyWebSocketServer(1024 * 1024);
  const server = serve({
    fetch: app.fetch,
    hostname: host,
    port: options.port ?? DEFAULT_HOST_PORT,
    websocket: { server: sockets },
  });
  const { port, url } = await listening(server, { host, tls: false });
  let e2b: RunningE2bService | undefined;
  const close = async () => {
    await e2b?.close();
    sockets.terminateAll();
    sockets.close();
    await closeServer(server);
    await lease?.close();
    await idle.close();
    await pools.close();
    webhooks?.close();
    metrics.close();
    egressFeed.close();
    await vms.close();
    await egress.close();
    await images.settled();
    await acceleratorSettled();
    await log.flush();
  };
  if (options.e2b) {
    const e2bOptions = { ...options.e2b, allowOrigins: options.e2b.allowOrigins ?? options.allowOrigins };
    // Loaded only when asked for: the proxy and the control plane stay out of memory otherwise.
    e2b = await import("./e2b/service.js")
      .then(({ startE2bService }) => startE2bService(services, e2bOptions, logger))
      .catch(async (err) => {
        await close();
        throw err;
      });
  }
  await log.info("Host service started", { url, settings: settings.file });
  return { url, port, services, e2b, close };
}

/** A desktop's transition as the operator's event stream names it (events.ts). */
function operatorEvent(transition: LifecycleEvent): Parameters<LifecycleEvents["emit"]> {
  const fields = { desktop: transition.name, runtime: transition.runtime };
  switch (transition.type) {
    case "created":
      return ["create", fields];
    case "started":
      return ["run", fields];
    case "stopped":
      return ["stop", fields];
    case "deleted":
      return ["delete", fields];
    case "ready":
      return ["ready", { ...fields, ms: transition.ms }];
    case "hibernated":
      return [
        "hibernate",
        {
          ...fields,
          ms: transition.ms,
          mode: transition.mode,
          ...(transition.why ? { reason: transition.why } : {}),
        },
      ];
    case "resumed":
      return ["resume", { ...fields, ms: transition.ms }];
    case "woke":
      return ["resume", { ...fields, ms: transition.ms, woke: transition.why }];
    case "failed":
      return ["failure", { ...fields, error: `${transition.operation} failed: ${transition.error}` }];
  }
}

/**
 * The container runtime, when the service has an engine: one named by the options or the settings,
 * `DOCKER_HOST`, or Docker's or podman's socket where one exists. Without any, containers are off
 * (asking for one names the option that turns them on).
 */
async function containerRuntime(
  options: HostServiceOptions,
  settings: SettingsStore,
  log: HostLog,
  egress: EgressService,
): Promise<ContainerRuntime | undefined> {
  if (options.containerEngine === false) return undefined;
  const configured = (await settings.read()).containers;
  const engine = options.containerEngine ?? configured?.engine;
  const present = [DOCKER_SOCKET, PODMAN_SOCKET].some((socket) => existsSync(socket));
  if (!engine && !process.env.DOCKER_HOST && !present && options.defaultRuntime !== "container")
    return undefined;
  return new ContainerRuntime(
    {
      engine,
      desktopImage: options.desktopImage ?? configured?.desktopImage,
      ulimits: options.containerUlimits ?? configured?.ulimits?.map(parseUlimit),
      publishedPorts: options.containerPorts,
      startBoostMaxMs: options.containerStartBoostMaxMs,
      desktopKeys: options.desktopKeys,
      stopGraceMs: options.stopGraceMs,
      secretsDir: join(await settings.homeDirectory(), ".containers"),
      egress,
    },
    log,
  );
}

/** A token as the service will compare it: printable, no spaces, long enough to resist guessing. */
function checkedToken(token: string | undefined): string | undefined {
  if (token === undefined) return undefined;
  const trimmed = token.trim();
  if (!/^[A-Za-z0-9._~+/-]+=*$/.test(trimmed)) {
    throw new Error("the host token may hold only letters, digits and ._~+/- (e.g. `openssl rand -hex 32`)");
  }
  if (trimmed.length < 16) throw new Error("the host token is too short: use at least 16 characters");
  return trimmed;
}
