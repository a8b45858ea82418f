/**
 * Starts the host service: settings, log, VM service, HTTP app, listening on loopback by default.
 * Used by `hangar host serve` and by the tests (port 0, temporary config and home directories).
 * Closing it leaves the VMs running; a new service finds them again.
 */
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { type Logger, silentLogger } from "../common/logger.js";
import { isLoopbackName, OriginPolicy } from "../common/origin-policy.js";
import { LazyWebSocketServer } from "../common/ws-server.js";
import { createHostApp } from "./app.js";
import { HostLog } from "./host-log.js";
import { ImageService } from "./image-service.js";
import { DEFAULT_HOST_PORT } from "./port.js";
import { acceleratorSettled, detectAccelerator } from "./qemu/accel.js";
import { QemuRuntime, type QemuRuntimeOptions } from "./qemu/qemu-runtime.js";
import type { RuntimeKind } from "./runtimes/runtime.js";
import type { HostServices } from "./services.js";
import { type SettingsOptions, SettingsStore } from "./settings.js";
import { VmService } from "./vm-service.js";
import { VmStore } from "./vm-store.js";

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
}

export interface RunningHostService {
  readonly url: string;
  readonly port: number;
  readonly services: HostServices;
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
  const images = new ImageService({
    settings,
    store,
    log,
    isRunning: (vm): Promise<boolean> => qemu.isRunning(vm),
  });
  const qemu = new QemuRuntime(settings, store, log, images, options);
  const vms = new VmService([qemu], options.defaultRuntime ?? "qemu", images, log);
  const services: HostServices = { settings, vms, images, log };
  await vms.recover();
  await images.recover();
  void detectAccelerator(); // probe once now, so the first run does not wait for it

  const app = createHostApp(services, { log: logger, originPolicy, token });
  // The page's VNC view (`WS /vnc/{name}`); its frames are small, the VNC protocol's own.
  const sockets = new LazyWebSocketServer(1024 * 1024);
  const server = serve({
    fetch: app.fetch,
    hostname: host,
    port: options.port ?? DEFAULT_HOST_PORT,
    websocket: { server: sockets },
  });
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });
  const { port } = server.address() as AddressInfo;
  const shownHost = host.includes(":") ? `[${host}]` : host;
  const url = `http://${shownHost}:${port}`;
  await log.info("Host service started", { url, settings: settings.file });
  return {
    url,
    port,
    services,
    close: async () => {
      sockets.terminateAll();
      sockets.close();
      await new Promise<void>((resolve) => {
        if ("closeAllConnections" in server) server.closeAllConnections();
        server.close(() => resolve());
      });
      await vms.close();
      await images.settled();
      await acceleratorSettled();
      await log.flush();
    },
  };
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
