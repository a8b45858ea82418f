/**
 * Starts the computer server: builds the registry from every command definition, the HTTP app,
 * and listens. Used by `hangar serve` and by the tests (on port 0).
 */
import type { Server as HttpServer, IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { homedir } from "node:os";
import { join } from "node:path";
import { allCommands } from "../../commands/index.js";
import { type BrowserOptions, BrowserSession, browserProfileDir } from "../browser/session.js";
import { sweepInterruptedWrites } from "../common/atomic-write.js";
import {
  collectGarbage,
  collectGarbageIfGrown,
  IDLE_COLLECT_MS,
  idleTimer,
  QUIET_COLLECT_MS,
} from "../common/idle.js";
import { createLazyAdaptorServer } from "../common/lazy-node-server.js";
import { closeServer, listening } from "../common/listen.js";
import { loadOnce } from "../common/load-once.js";
import { type Logger, silentLogger } from "../common/logger.js";
import { isLoopbackName, nodeHeader, OriginPolicy, policyHeaders } from "../common/origin-policy.js";
import { LazyWebSocketServer } from "../common/ws-server.js";
import type { AccessibilityProvider } from "../desktop/accessibility.js";
import { atspiProvider } from "../desktop/atspi/index.js";
import { type AudioSource, audioFromEnv } from "../desktop/audio.js";
import { type DesktopProvider, noDesktop } from "../desktop/backend.js";
import { LiveStreams } from "../desktop/live/live-streams.js";
import { Recordings } from "../desktop/recording/recordings.js";
import { AgentFileSystem } from "../os/agent-files.js";
import type { CommandUser } from "../os/command-user.js";
import { WarmShells } from "../os/warm-shells.js";
import { computerListener, createComputerApp, DEFAULT_BODY_LIMIT, statusBody } from "./app.js";
import { Authenticator, type CloudAuthOptions, cloudAuth } from "./auth/index.js";
import { ActivityLog } from "./core/activity.js";
import { ControlLease } from "./core/control.js";
import { Idleness } from "./core/idleness.js";
import { CommandRegistry } from "./core/registry.js";
import { Trajectories } from "./core/trajectories/trajectories.js";
import type { TlsFiles } from "./tls.js";
import { CommandMetrics } from "./transports/metrics/metrics.js";
import { PtySessions, type PtySessionsOptions } from "./transports/pty/pty-sessions.js";
import { wsTransport } from "./transports/ws/ws.js";

export interface ComputerServerOptions {
  host?: string;
  port?: number;
  log?: Logger;
  desktop?: DesktopProvider;
  /**
   * Default on Linux: AT-SPI on the session bus named by this process's environment at the time of
   * the first accessibility command (a virtual desktop started by `serve` exports its bus there).
   */
  accessibility?: AccessibilityProvider;
  spreadResult?: boolean;
  /** Where `/status` reads this launch's id (a guest's restore or fork; default `BOOT_ID_FILE`). */
  bootIdFile?: string;
  /**
   * Check every result against its command's result schema (see `RegistryOptions.checkResults`);
   * default: when `HANGAR_CHECK_RESULTS=1`, as the tests set it.
   */
  checkResults?: boolean;
  /** Terminal sessions (scrollback, idle timeout); the PTY routes are always served. */
  pty?: PtySessionsOptions;
  bodyLimitBytes?: number;
  /** The browser of the `browser_*` commands and `/playwright_exec` (Chromium on this desktop). */
  browser?: Omit<BrowserOptions, "env" | "log"> & Partial<Pick<BrowserOptions, "env">>;
  /** Web pages (origins) allowed to use the server from a browser; `*` only in cloud mode. */
  allowOrigins?: string[];
  /** Host names accepted in `Host` besides loopback ones (see origin-policy.ts). */
  allowHosts?: string[];
  /** Cloud mode: every route but `/status` needs the container name and an API key. */
  cloud?: CloudAuthOptions;
  /** Serve HTTPS and WSS with this certificate and key. */
  tls?: TlsFiles;
  /** Largest `/ws` message in bytes (default: the body limit, 64 MiB). */
  wsMessageLimitBytes?: number;
  /** In cloud mode, a `/ws` socket that has not authenticated after this long is closed (default 10 s). */
  wsAuthDeadlineMs?: number;
  /** Commands kept in the activity timeline (default 500). */
  activitySize?: number;
  /**
   * Shells kept waiting for `run_command` (src/os/warm-shells.ts), so that a command does not fork
   * this process (default `DEFAULT_WARM_SHELLS`); 0: each command spawns its shell.
   */
  warmShells?: number;
  /**
   * The unprivileged user every process an agent starts runs as (`--command-user`,
   * src/os/command-user.ts): `run_command`, `launch`, PTYs, OSWorld's `/execute`, envd's processes.
   * Warm shells run as the server, so there are none with it: each command spawns its shell.
   */
  commandUser?: CommandUser;
  /** Collect garbage after a few seconds without requests, so that memory goes back to the system. */
  collectGarbageWhenIdle?: boolean;
  /**
   * An idle keep-alive connection is closed after this long (default 65 s: above the 60 s idle
   * timeout of common load balancers, so that they never reuse a connection the server has just closed).
   */
  keepAliveTimeoutMs?: number;
  /**
   * Video recordings (`start_recording`): the directory of recordings made without a path, and of
   * their index (default `defaultRecordingsDir()`), and the ffmpeg program (default `$HANGAR_FFMPEG`
   * or `ffmpeg` on PATH).
   */
  recordings?: { dir?: string; ffmpeg?: string };
  /**
   * The desktop's sound (a PulseAudio source), recorded and streamed; default: what `PULSE_SERVER`
   * and `HANGAR_AUDIO_SOURCE` name (the virtual display sets them), `null`: none.
   */
  audio?: AudioSource | null;
  /**
   * Trajectories (`start_trajectory`): their directory (default `defaultTrajectoriesDir()`), whether
   * every command is recorded from the start (`--trajectory-dir`), and the bytes the directory may hold.
   */
  trajectories?: { dir?: string; always?: boolean; maxBytes?: number };
  /**
   * OSWorld's desktop controller API on its own listener (`--osworld`, docs/osworld.md): its port
   * (default 5000; 0 picks a free one) on the server's address, with the same origin policy and keys.
   */
  osworld?: { port?: number; openFileTimeoutSeconds?: number };
  /**
   * E2B's envd on its own listener (`--envd-port`, docs/e2b.md): its port (E2B's is 49983; 0 picks a
   * free one) on the server's address, with the origin policy, and the access token from
   * `--envd-token-file` (required beyond loopback; else the first `POST /init` may set one).
   */
  envd?: {
    port: number;
    token?: string;
    /** Its own address (default the server's): a container's envd stays on loopback (`--envd-host`). */
    host?: string;
  };
}

export const DEFAULT_OSWORLD_PORT = 5000;
/** envd's port in E2B's sandboxes. */
export const DEFAULT_ENVD_PORT = 49983;

export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 65_000;

export interface RunningComputerServer {
  readonly url: string;
  readonly port: number;
  readonly registry: CommandRegistry;
  /** The OSWorld controller's URL, when it is served. */
  readonly osworldUrl?: string;
  /** envd's URL, when it is served. */
  readonly envdUrl?: string;
  close(): Promise<void>;
}

export async function startComputerServer(
  options: ComputerServerOptions = {},
): Promise<RunningComputerServer> {
  const log = options.log ?? silentLogger;
  const host = options.host ?? "127.0.0.1";
  const envdHost = options.envd?.host ?? host;
  if (options.envd && !options.envd.token && !isLoopbackName(envdHost)) {
    throw new Error(
      `envd on ${envdHost} (beyond loopback) needs --envd-token-file: without a token, anyone who reaches ` +
        "its port runs commands on this desktop",
    );
  }
  const originPolicy = new OriginPolicy({
    listenHost: host,
    allowOrigins: options.allowOrigins,
    allowHosts: options.allowHosts,
    authenticated: Boolean(options.cloud),
  });
  const ownAccessibility = options.accessibility ? undefined : defaultAccessibility();
  const accessibility = options.accessibility ?? ownAccessibility;
  // The desktop's variables are read when the browser starts: a virtual display exports them here.
  // One profile per server (by its port, known once it listens): Chromium locks a profile.
  let listeningPort: number | undefined;
  const browser = new BrowserSession({
    env: () => process.env,
    ...options.browser,
    profileDir: options.browser?.profileDir ?? (() => browserProfileDir(listeningPort, options.commandUser)),
    user: options.commandUser,
    log,
  });
  const activity = new ActivityLog({ size: options.activitySize });
  // The desktop's sound: recorded into videos and streamed live.
  const audio = options.audio === null ? undefined : (options.audio ?? audioFromEnv(process.env));
  const commandUser = options.commandUser;
  // With a command user, the server (root) reaches files only through a worker of that user.
  const files = commandUser ? new AgentFileSystem(commandUser, { log }) : undefined;
  const recordings = new Recordings({
    desktop: options.desktop ?? noDesktop,
    dir: options.recordings?.dir ?? defaultRecordingsDir(),
    ffmpeg: options.recordings?.ffmpeg,
    audio,
    files,
    log,
  });
  // The H.264 live streams of the console (`/live.mp4`, the live view) and OSWorld's streaming routes.
  const streams = new LiveStreams({
    desktop: options.desktop ?? noDesktop,
    ffmpeg: options.recordings?.ffmpeg,
    audio,
    log,
  });
  const trajectories = new Trajectories({
    activity,
    dir: options.trajectories?.dir ?? defaultTrajectoriesDir(),
    always: options.trajectories?.always ?? false,
    maxBytes: options.trajectories?.maxBytes,
    log,
  });
  const shells =
    options.warmShells === 0 || commandUser ? undefined : new WarmShells({ max: options.warmShells, log });
  // Who drives the desktop; taking and handing back are in the timeline (and so in trajectories).
  const control = new ControlLease();
  control.subscribe(({ type, ...params }) =>
    activity.record({
      command: type,
      params,
      transport: type.startsWith("help") ? "control" : "live",
      flags: {},
      ms: 0,
      outcome: { success: true, result: {} },
    }),
  );
  // Whether the desktop is in use (`GET /activity/idle`), for a host that puts idle desktops to sleep.
  const idleness = new Idleness({ activity, control, desktop: options.desktop ?? noDesktop });
  const metrics = new CommandMetrics();
  const registry = new CommandRegistry(allCommands, {
    control,
    desktop: options.desktop,
    accessibility,
    browser: async () => browser,
    shells,
    commandUser,
    files,
    recordings,
    trajectories,
    log,
    checkResults: options.checkResults ?? resultsCheckedByEnv(),
    observe: (run) => {
      activity.record(run);
      metrics.observe(run);
    },
  });
  const pty = new PtySessions({ ...options.pty, user: commandUser });
  const authenticator =
    options.cloud && new Authenticator({ ...options.cloud, log: options.cloud.log ?? log });
  const sockets = new LazyWebSocketServer(
    options.wsMessageLimitBytes ?? options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT,
  );
  const features = [
    "batch",
    "ws",
    "pty",
    "mcp",
    "stream",
    "tunnel",
    ...(accessibility ? ["accessibility"] : []),
  ];
  const app = createComputerApp({
    registry,
    log,
    spreadResult: options.spreadResult,
    bodyLimitBytes: options.bodyLimitBytes,
    features,
    bootIdFile: options.bootIdFile,
    pty,
    originPolicy,
    auth: authenticator && cloudAuth(authenticator),
    console: { activity, desktop: options.desktop ?? noDesktop, control, streams, idleness },
    recordings: { recordings, trajectories },
    metrics,
    websocket: wsTransport({ registry, authenticator, authDeadlineMs: options.wsAuthDeadlineMs, log }),
  });
  const tls = options.tls && {
    createServer: (await import("node:https")).createServer,
    serverOptions: { ...options.tls },
  };
  // With --trajectory-dir, the first command is in the trajectory.
  await trajectories.ready;
  // `GET /status` and `POST /cmd` are answered before hono's Node adapter, with the app's origin
  // policy and keys (app.ts); the adapter is loaded at the first other request (lazy-node-server.ts).
  const answerStatus = statusAnswer(statusBody(features, options.bootIdFile), originPolicy);
  const front = (adapter: RequestListener): RequestListener => {
    const listener = computerListener(
      {
        registry,
        log,
        spreadResult: options.spreadResult,
        bodyLimitBytes: options.bodyLimitBytes,
        originPolicy,
        authenticator: authenticator || undefined,
      },
      adapter,
    );
    return (req, res) => {
      if (!answerStatus(req, res)) listener(req, res);
    };
  };
  const server = createLazyAdaptorServer({
    fetch: app.fetch,
    hostname: host,
    websocket: { server: sockets },
    front,
    ...tls,
  });
  server.keepAliveTimeout = options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS;
  // The time to receive a request's headers must exceed it, or Node cuts reused connections short.
  server.headersTimeout = server.keepAliveTimeout + 5000;
  void sweepInterruptedWrites();
  const { port, url } = await listening(server, {
    host,
    tls: Boolean(tls),
    listen: () => server.listen(options.port ?? (tls ? 8443 : 8000), host),
  });
  listeningPort = port;
  const idle = idleTimer(IDLE_COLLECT_MS, () => {
    collectGarbage();
    const mb = (bytes: number) => Math.round(bytes / 1e5) / 10;
    const { rss, heapTotal, heapUsed, external, arrayBuffers } = process.memoryUsage();
    log.debug(
      {
        rssMb: mb(rss),
        heapTotalMb: mb(heapTotal),
        heapUsedMb: mb(heapUsed),
        externalMb: mb(external),
        arrayBuffersMb: mb(arrayBuffers),
      },
      "idle: memory after a full garbage collection",
    );
  });
  const quiet = idleTimer(QUIET_COLLECT_MS, () => {
    if (collectGarbageIfGrown()) log.debug("quiet: the heap had grown since the last collection, collected");
  });
  if (options.collectGarbageWhenIdle) {
    server.on("request", () => {
      idle.touch();
      quiet.touch();
    });
    // Not on "upgrade": a second listener there stops @hono/node-server from answering upgrade
    // requests to routes that are not WebSockets (they would hang).
    // And once from the start: what loading the program left (a container's server held 35 MB of
    // anonymous memory 15 s after its start, 19 MB after a collection) goes back in a warm pool's
    // desktop that no request has reached yet, not when V8 gets to it.
    idle.touch();
  }
  const envd = options.envd
    ? await startEnvdListener(options.envd, {
        host: envdHost,
        originPolicy,
        bodyLimitBytes: options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT,
        pty,
        shells,
        user: commandUser,
        files,
        tls,
        log,
      }).catch((err) => {
        files?.close();
        server.close();
        throw err;
      })
    : undefined;
  const osworld = options.osworld
    ? await startOsworld(options.osworld, {
        url,
        host,
        registry,
        desktop: options.desktop ?? noDesktop,
        streams,
        originPolicy,
        authenticator: authenticator || undefined,
        tls,
        certificate: options.tls?.cert,
        bodyLimitBytes: options.bodyLimitBytes ?? DEFAULT_BODY_LIMIT,
        commandUser,
        log,
      }).catch(async (err) => {
        await envd?.close();
        files?.close();
        server.close();
        throw err;
      })
    : undefined;
  return {
    url,
    port,
    registry,
    osworldUrl: osworld?.url,
    envdUrl: envd?.url,
    close: async () => {
      await osworld?.close();
      await envd?.close();
      idle.cancel();
      quiet.cancel();
      shells?.close();
      files?.close();
      ownAccessibility?.close();
      pty.close();
      sockets.terminateAll();
      sockets.close();
      await Promise.all([
        closeServer(server),
        browser.close(),
        recordings.close(),
        trajectories.close(),
        streams.close(),
      ]);
    },
  };
}

/**
 * `GET /status` answered as the app answers it, without the app: for a request that the origin
 * policy lets through without CORS headers (probes, clients, the host service). Any other (refused,
 * or from a page that is allowed) goes to the app, which answers it with the same body.
 */
function statusAnswer(json: () => string, policy: OriginPolicy) {
  return (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== "GET" || !(req.url === "/status" || req.url?.startsWith("/status?"))) return false;
    const verdict = policy.check(policyHeaders((name) => nodeHeader(req, name)));
    if (!verdict.ok || verdict.cors) return false;
    const body = json();
    res
      .writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) })
      .end(body);
    return true;
  };
}

/** The OSWorld controller's listener and the environment of the programs it runs. */
async function startOsworld(
  options: NonNullable<ComputerServerOptions["osworld"]>,
  server: {
    url: string;
    host: string;
    registry: CommandRegistry;
    desktop: DesktopProvider;
    streams: LiveStreams;
    originPolicy: OriginPolicy;
    authenticator?: Authenticator;
    /** The main listener's TLS: the controller has it too, so that keys never cross the network in clear. */
    tls?: { createServer: unknown; serverOptions: TlsFiles };
    certificate?: Buffer;
    bodyLimitBytes: number;
    commandUser?: CommandUser;
    log: Logger;
  },
) {
  // The controller's routes are loaded only with --osworld, and only at its first request: a dozen
  // modules that no other server needs, which a desktop's first screenshot should not wait behind.
  // The way back for OSWorld's Python (a small module; it also removes what a killed server left).
  const { preparePythonEnv } = await import("./transports/osworld/python-env.js");
  const authenticator = server.authenticator;
  const python = preparePythonEnv({
    url: server.url,
    certificate: server.certificate,
    user: server.commandUser,
    cloud: authenticator && {
      containerName: authenticator.containerName,
      addLocalKey: (key) => authenticator.addLocalKey(key),
    },
  });
  const app = loadOnce(async () => {
    const [{ osworldCommands }, { createOsworldApp }] = await Promise.all([
      import("../../commands/osworld.js"),
      import("./transports/osworld/osworld-app.js"),
    ]);
    return createOsworldApp({
      registry: server.registry,
      commands: osworldCommands,
      originPolicy: server.originPolicy,
      auth: authenticator && cloudAuth(authenticator),
      bodyLimitBytes: server.bodyLimitBytes,
      childEnv: async () => ({ ...(await desktopEnv(server.desktop)), ...python.env }),
      streams: server.streams,
      openFileTimeoutSeconds: options.openFileTimeoutSeconds,
      log: server.log,
    });
  });
  // The streaming routes' sockets (`/ws/h264`, `/ws/control`).
  const sockets = new LazyWebSocketServer(server.bodyLimitBytes);
  const listener = createLazyAdaptorServer({
    fetch: async (request, env) => {
      const routes = await app.get();
      return routes.fetch(request, env as Parameters<typeof routes.fetch>[1]);
    },
    hostname: server.host,
    websocket: { server: sockets },
    ...(server.tls as object),
  });
  const { url } = await listening(listener, {
    host: server.host,
    tls: Boolean(server.tls),
    listen: () => listener.listen(options.port ?? DEFAULT_OSWORLD_PORT, server.host),
  }).catch((err) => {
    python.close();
    throw err;
  });
  return {
    url,
    close: async () => {
      sockets.terminateAll();
      sockets.close();
      await closeServer(listener);
      python.close();
    },
  };
}

/** envd's listener; its modules are loaded only when it is served. */
async function startEnvdListener(
  options: NonNullable<ComputerServerOptions["envd"]>,
  server: Omit<import("./transports/envd/envd-server.js").EnvdListenerOptions, "token"> & {
    host: string;
    tls?: { createServer: unknown; serverOptions: object };
  },
) {
  // envd's modules (Connect, protobuf, its services) are loaded at its first request: a desktop's
  // first screenshot should not wait behind them.
  const envd = loadOnce(() =>
    import("./transports/envd/envd-server.js").then(({ envdListener }) =>
      envdListener({ ...server, token: options.token }),
    ),
  );
  const createServer = (server.tls?.createServer ?? (await import("node:http")).createServer) as (
    serverOptions: object,
    listener: RequestListener,
  ) => HttpServer;
  const listener = createServer({ ...(server.tls?.serverOptions ?? {}) }, (req, res) => {
    envd.get().then(
      (loaded) => loaded.listener(req, res),
      (err: Error) => res.destroy(err),
    );
  });
  const { url } = await listening(listener, {
    host: server.host,
    tls: Boolean(server.tls),
    listen: () => listener.listen(options.port, server.host),
  });
  return {
    url,
    close: async () => {
      await closeServer(listener);
      (await envd.current?.catch(() => undefined))?.close();
    },
  };
}

/** The desktop's variables (DISPLAY, its session bus), or none when there is no desktop. */
async function desktopEnv(desktop: DesktopProvider): Promise<Record<string, string>> {
  try {
    return (await desktop()).env ?? {};
  } catch {
    return {};
  }
}

/** Where recordings go without a path: `$XDG_DATA_HOME/hangar/recordings` (~/.local/share/…). */
export function defaultRecordingsDir(): string {
  return join(dataHome(), "hangar", "recordings");
}

/** Where trajectories go without `--trajectory-dir`: `$XDG_DATA_HOME/hangar/trajectories`. */
export function defaultTrajectoriesDir(): string {
  return join(dataHome(), "hangar", "trajectories");
}

function dataHome(): string {
  return process.env.XDG_DATA_HOME || join(homedir(), ".local", "share");
}

/**
 * The accessibility provider of this platform: on Linux, AT-SPI on the session bus named by this
 * process's environment at the first accessibility command (a virtual desktop that `serve` starts
 * exports its bus there). Undefined elsewhere.
 */
export function defaultAccessibility() {
  return process.platform === "linux" ? atspiProvider(() => process.env) : undefined;
}

/** Whether the environment asks for results to be checked (the tests set `HANGAR_CHECK_RESULTS=1`). */
export function resultsCheckedByEnv(): boolean {
  return process.env.HANGAR_CHECK_RESULTS === "1";
}
