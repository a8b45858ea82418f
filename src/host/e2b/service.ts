/**
 * E2B's protocol on a listener of its own (`hangar host serve --e2b-port 3000`): the control plane
 * (api.ts) for E2B's SDKs, and the sandboxes' traffic (router.ts), told apart by the request:
 *
 * - `Host: {port}-{sandboxID}.{domain}`: a sandbox's port (`getHost(port)`);
 * - `E2b-Sandbox-Id` (+ `E2b-Sandbox-Port`, default envd's): a sandbox's port, when the SDK is
 *   given `E2B_SANDBOX_URL` (this listener's address);
 * - anything else: the control plane (`E2B_API_URL`).
 *
 * On one machine without DNS, `domain` is `localhost:<port>`: `*.localhost` names are loopback
 * (browsers resolve them so; other clients send the name in `Host` to 127.0.0.1). Elsewhere it is
 * a wildcard name (`--e2b-domain`) that points at this listener.
 *
 * The origin policy of this listener alone accepts those names in `Host`: the control plane takes
 * loopback names and the domain's (also as `api.` and `sandbox.`), a sandbox's port takes its own
 * name, and a web page there may call only the ports of the same sandbox (its own origin).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import { getRequestListener } from "@hono/node-server";
import { type Logger, silentLogger } from "../../common/logger.js";
import { isLoopbackName, nodeHeader, OriginPolicy, policyHeaders } from "../../common/origin-policy.js";
import { PACKAGE_ROOT } from "../../common/version.js";
import { ContainerRuntime } from "../container/container-runtime.js";
import type { RuntimeKind } from "../desktops/kinds.js";
import { DEFAULT_POOL_SPEC } from "../pools/pool-manager.js";
import type { PoolSpec } from "../pools/pool-types.js";
import type { HostServices } from "../services.js";
import { e2bApi } from "./api.js";
import { loadE2bApiKeys } from "./api-keys.js";
import { ENVD_PORT } from "./envd.js";
import { hibernationPauser } from "./pause.js";
import { type RouteTarget, SandboxRouter } from "./router.js";
import { SandboxStore } from "./sandbox-store.js";
import { Sandboxes } from "./sandboxes.js";
import { Templates } from "./templates.js";

export const DEFAULT_E2B_PORT = 3000;
export const DEFAULT_DESKTOP_TEMPLATE_IMAGE = "hangar-desktop:latest";

export interface E2bOptions {
  port: number;
  /** Where it listens (default loopback). */
  host?: string;
  /** A file of API keys (mode 0600); `HANGAR_E2B_API_KEYS` in `env` adds keys. */
  apiKeyFile?: string;
  env?: NodeJS.ProcessEnv;
  /** What per-port host names end with (default `localhost:<port>`). */
  domain?: string;
  /** Where sandboxes made from images run (default: the service's runtime, containers rather than QEMU). */
  runtime?: RuntimeKind;
  /** The image of the `desktop` template (default hangar-desktop:latest, built on the desktop image when missing). */
  desktopTemplateImage?: string;
  /** The sizes of a sandbox's desktop (default: a pool's, with 2 CPUs). */
  spec?: Partial<PoolSpec>;
  /** Web pages allowed to call the control plane (the host service's `--allow-origin`). */
  allowOrigins?: string[];
  /** How long envd may take to listen once a new desktop answers (default 5 s). */
  envdWaitMs?: number;
  /** How long a create waits for a new desktop to answer (default 10 min). */
  readyTimeoutMs?: number;
}

export interface RunningE2bService {
  readonly url: string;
  readonly port: number;
  readonly domain: string;
  readonly sandboxes: Sandboxes;
  close(): Promise<void>;
}

/** `{port}-{sandboxID}.` at the start of a host name: a sandbox's port. */
const PER_PORT = /^(\d{1,5})-([a-z0-9]+)\.(.+)$/;

export async function startE2bService(
  services: HostServices,
  options: E2bOptions,
  logger: Logger = silentLogger,
): Promise<RunningE2bService> {
  const keys = await loadE2bApiKeys(options.apiKeyFile, options.env ?? process.env);
  const { vms, pools, log } = services;
  const runtime =
    options.runtime ??
    (vms.defaultRuntime === "qemu" && vms.kinds.includes("container") ? "container" : vms.defaultRuntime);
  const desktopTemplateImage = options.desktopTemplateImage ?? DEFAULT_DESKTOP_TEMPLATE_IMAGE;
  const images = vms.runtime(runtime);
  if (images instanceof ContainerRuntime) {
    images.images.addRecipe(desktopTemplateImage, {
      context: join(PACKAGE_ROOT, "deploy", "e2b-desktop"),
      files: ["Dockerfile", "Xvfb"],
      base: images.defaultImage,
      baseArg: "BASE",
    });
  }
  const store = new SandboxStore(join(await services.settings.homeDirectory(), ".e2b", "sandboxes.json"));
  const sandboxes = new Sandboxes(
    vms,
    pools,
    store,
    new Templates(vms, pools, { runtime, desktopTemplateImage }),
    hibernationPauser(vms),
    services.egress,
    log,
    {
      spec: { ...DEFAULT_POOL_SPEC, cpu: 2, ...options.spec },
      envdWaitMs: options.envdWaitMs,
      readyTimeoutMs: options.readyTimeoutMs,
    },
  );
  await sandboxes.start();
  const router = new SandboxRouter(sandboxes, logger);

  const host = options.host ?? "127.0.0.1";
  let domain = options.domain ?? "";
  const domainName = () => domain.replace(/:\d+$/, "").toLowerCase();
  const api = getRequestListener(e2bApi({ sandboxes, vms, keys, domain: () => domain }).fetch);
  const apiPolicy = () =>
    new OriginPolicy({
      listenHost: host,
      allowOrigins: options.allowOrigins,
      allowHosts: isLoopbackName(domainName())
        ? []
        : [domainName(), `api.${domainName()}`, `sandbox.${domainName()}`],
      authenticated: true,
    });
  let policy: OriginPolicy | undefined;

  /** Where a request goes, or why it is refused. */
  const classify = (
    req: IncomingMessage,
  ): { target?: RouteTarget; refusal?: { status: number; message: string } } => {
    const get = (name: string) => nodeHeader(req, name);
    const name = hostNameOf(get("host") ?? "");
    const perPort = PER_PORT.exec(name);
    if (perPort && perPort[3] === domainName()) {
      const target = { port: Number(perPort[1]), sandboxID: perPort[2] };
      if (target.port < 1 || target.port > 65535)
        return { refusal: { status: 400, message: `Invalid sandbox port ${perPort[1]}` } };
      const refusal = pageRefusal(policyHeaders(get), target, domainName(), options.allowOrigins ?? []);
      return refusal ? { refusal: { status: 403, message: refusal } } : { target };
    }
    policy ??= apiPolicy();
    const verdict = policy.check(policyHeaders(get));
    if (!verdict.ok) return { refusal: { status: 403, message: verdict.reason } };
    const sandboxID = get("e2b-sandbox-id");
    const portText = get("e2b-sandbox-port");
    if (sandboxID === undefined && portText === undefined) return {};
    if (!sandboxID || !/^[a-z0-9]+$/.test(sandboxID)) {
      return { refusal: { status: 400, message: "Invalid E2b-Sandbox-Id: expected the sandbox's id" } };
    }
    const port = portText === undefined ? ENVD_PORT : Number(portText);
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      return {
        refusal: { status: 400, message: `Invalid E2b-Sandbox-Port '${portText}': expected 1 to 65535` },
      };
    }
    return { target: { sandboxID, port } };
  };

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const { target, refusal } = classify(req);
    if (refusal) {
      if (refusal.status === 403)
        logger.warn(
          { host: req.headers.host, origin: req.headers.origin, reason: refusal.message },
          "e2b: request refused",
        );
      res.writeHead(refusal.status, { "content-type": "application/json" });
      res.end(JSON.stringify({ code: refusal.status, message: refusal.message }));
      return;
    }
    if (target) void router.web(req, res, target);
    else void api(req, res);
  });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const { target, refusal } = classify(req);
    if (target) return void router.ws(req, socket, head, target);
    const status = refusal?.status ?? 404;
    const message = refusal?.message ?? "The E2B API has no WebSocket routes: sandboxes' ports have them";
    socket.on("error", () => socket.destroy());
    socket.end(
      `HTTP/1.1 ${status} ${status === 403 ? "Forbidden" : "Not Found"}\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${JSON.stringify({ code: status, message })}`,
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  domain ||= `localhost:${port}`;
  const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
  await log.info("E2B API started", { url, domain, runtime });
  return {
    url,
    port,
    get domain() {
      return domain;
    },
    sandboxes,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
      router.close();
      await sandboxes.close();
    },
  };
}

/**
 * Why a request to a sandbox's port is refused, or "": no `Origin` (a program, or a person opening
 * the link), a page of the same sandbox (any of its ports), or an allowed origin pass; a page of
 * another site does not, nor a cross-site request without `Origin` that is not a navigation.
 */
function pageRefusal(
  headers: { origin?: string; fetchSite?: string; fetchMode?: string },
  target: RouteTarget,
  domainName: string,
  allowOrigins: string[],
): string {
  const origin = headers.origin?.trim();
  if (!origin) {
    const site = headers.fetchSite?.toLowerCase();
    if ((site === "cross-site" || site === "same-site") && headers.fetchMode !== "navigate") {
      return "Requests from web pages of other sites are refused";
    }
    return "";
  }
  if (allowOrigins.includes("*") || allowOrigins.includes(origin)) return "";
  const name = (() => {
    try {
      return new URL(origin).hostname.toLowerCase();
    } catch {
      return "";
    }
  })();
  const page = PER_PORT.exec(name);
  if (page && page[2] === target.sandboxID && page[3] === domainName) return "";
  return `Origin '${origin}' is refused: only pages of the same sandbox may use its ports`;
}

/** The host name of a `Host` header value, lower-case, without its port. */
function hostNameOf(host: string): string {
  try {
    return new URL(`http://${host}`).hostname.toLowerCase();
  } catch {
    return "";
  }
}
