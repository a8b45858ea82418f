/** `hangar host serve`: the VM host service (/svc API, QEMU). */
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import { type Command, InvalidArgumentError } from "commander";
import { createLogger } from "../common/logger.js";
import type { Ulimit } from "../host/container/container-runtime.js";
import { parsePortRange } from "../host/container/published-ports.js";
import { parseUlimit } from "../host/container/ulimits.js";
import { E2B_API_KEYS_ENV } from "../host/e2b/api-keys.js";
import { DEFAULT_HOST_PORT } from "../host/port.js";
import { loopbackNetworkProblem } from "../host/qemu/loopback.js";
import { webhookUrl } from "../host/webhooks.js";
import { HOST_TOKEN_ENV, readTokenFile } from "./host-client.js";
import { browserAccess, browserAccessOptions, logLevelOption, onShutdown, parsePort } from "./util.js";

function ipv4Address(value: string): string {
  if (isIP(value) !== 4) throw new InvalidArgumentError("expected an IPv4 address, e.g. 10.244.0.1");
  return value;
}

function runtimeKind(value: string) {
  if (value !== "qemu" && value !== "container" && value !== "kubernetes") {
    throw new InvalidArgumentError("expected qemu, container or kubernetes");
  }
  return value;
}

function reachMode(value: string) {
  if (value !== "relay" && value !== "pod-ip") throw new InvalidArgumentError("expected relay or pod-ip");
  return value;
}

function podSecurityLevel(value: string) {
  if (value !== "baseline" && value !== "restricted")
    throw new InvalidArgumentError("expected baseline or restricted");
  return value;
}

function collectWebhook(value: string, previous: string[] = []) {
  try {
    return [...previous, webhookUrl(value)];
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message.replace(/^--webhook: /, ""));
  }
}

function loopbackNetwork(value: string) {
  const problem = loopbackNetworkProblem(value);
  if (problem) throw new InvalidArgumentError(problem);
  return value;
}

/** A repeatable option's values, in order. */
function collect(value: string, previous: string[] = []) {
  return [...previous, value];
}

function portRange(value: string) {
  const range = parsePortRange(value);
  if (typeof range === "string") throw new InvalidArgumentError(range);
  return range;
}

function collectUlimit(value: string, previous: Ulimit[] = []) {
  try {
    return [...previous, parseUlimit(value)];
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

export function registerHost(program: Command) {
  const host = program
    .command("host")
    .description("The host service: runs and manages desktops (QEMU VMs, containers) and warm pools");
  const serve = host
    .command("serve")
    .description("Start the host service API (/svc/...) that creates, runs and stops VMs")
    .option("--host <address>", "address to listen on (keep loopback unless you mean it)", "127.0.0.1")
    .option("--port <port>", "port to listen on", parsePort, DEFAULT_HOST_PORT)
    .addOption(logLevelOption("info"))
    .option("--stop-grace <seconds>", "how long stop waits for the guest to power down", "10")
    .option(
      "--token-file <path>",
      `require Authorization: Bearer <the token in this file> on every request (also $${HOST_TOKEN_ENV})`,
    )
    .option("--no-auth", "allow listening beyond loopback without a token (anyone who connects manages VMs)")
    .option(
      "--runtime <kind>",
      "where a desktop runs when its request names none: qemu, container or kubernetes",
      runtimeKind,
      "qemu",
    )
    .option(
      "--container-engine <address>",
      "the container engine: unix:///path/to/engine.sock or tcp://host:port (default $DOCKER_HOST, then Docker's or podman's socket)",
    )
    .option(
      "--desktop-image <ref>",
      "the image of container desktops (default hangar:latest), built from the Dockerfile or pulled when missing",
    )
    .option(
      "--container-ulimit <name=soft:hard>",
      "a limit for container desktops' processes, e.g. nofile=10000:10000 (repeat it; needed where the host forbids raising limits)",
      collectUlimit,
    )
    .option(
      "--container-ports <first-last>",
      "the loopback ports container desktops are published on (default 20000-29999): outside the " +
        "kernel's ephemeral ports, which other programs' connections and listeners take",
      portRange,
    )
    .option(
      "--kubeconfig <file>",
      "Kubernetes desktops: the cluster's kubeconfig (default $KUBECONFIG, ~/.kube/config, then the Pod's service account)",
    )
    .option("--namespace <name>", "Kubernetes desktops: the namespace (default the kubeconfig context's)")
    .option(
      "--kubernetes-reach <mode>",
      "how records address Kubernetes desktops: relay (a loopback port of this service, through the API server) or pod-ip",
      reachMode,
    )
    .option(
      "--kubernetes-pod-security <level>",
      "Kubernetes desktops of the desktop image: baseline (default; its entry point starts as root with " +
        "SETUID, SETGID, KILL, CHOWN, DAC_OVERRIDE and FOWNER, and the agent runs as the desktop user, out of " +
        "the server's reach) or restricted (non-root, no capabilities: one user runs the server and the agent)",
      podSecurityLevel,
    )
    .option(
      "--pools-in-cluster",
      "keep the warm pools in a ConfigMap of the Kubernetes namespace (hangar-pools) instead of a file",
    )
    .option(
      "--lease-duration <seconds>",
      "with --pools-in-cluster: how long the leader Lease (hangar-pools-leader) lasts unless renewed",
      "15",
    )
    .option(
      "--desktop-keys",
      "give every container desktop an API key of its own (its computer server in cloud mode)",
    )
    .option(
      "--webhook <url>",
      "POST every lifecycle event (create, ready, claim, release, hibernate, resume, delete, failure) " +
        "to this URL as JSON, retried with backoff; repeatable (GET /svc/events streams the same)",
      collectWebhook,
    )
    .option(
      "--webhook-secret-file <file>",
      "sign webhook posts: X-Hangar-Signature: sha256=<HMAC-SHA256 of the body with this file's secret>",
    )
    .option(
      "--vm-network <127.A.B>",
      "the loopback addresses QEMU VMs get, 127.A.B.2–254 (default 127.0.1); another for a second host service on this machine",
      loopbackNetwork,
    )
    .option(
      "--e2b-port <port>",
      "serve E2B's sandbox API (its SDKs, unmodified) on this port, e.g. 3000",
      parsePort,
    )
    .option("--e2b-host <address>", "with --e2b-port: the address to listen on", "127.0.0.1")
    .option(
      "--e2b-api-key-file <path>",
      `with --e2b-port: the API keys clients send as E2B_API_KEY, one a line, in a file of mode 0600 (also $${E2B_API_KEYS_ENV}, comma-separated)`,
    )
    .option(
      "--e2b-domain <domain>",
      "with --e2b-port: what sandboxes' per-port host names end with, {port}-{id}.<domain> (default localhost:<e2b port>)",
    )
    .option(
      "--e2b-runtime <kind>",
      "with --e2b-port: where sandboxes made from images run (default: --runtime, containers rather than QEMU)",
      runtimeKind,
    )
    .option(
      "--e2b-desktop-image <ref>",
      "with --e2b-port: the image of E2B's desktop template (default hangar-desktop:latest, built on --desktop-image when missing)",
    )
    .option(
      "--egress-resolver <ip[:port]>",
      "caged desktops (docs/egress.md): a DNS server the egress proxy resolves names with, instead of the host's (repeat it)",
      collect,
    )
    .option(
      "--egress-trust <file>",
      "caged desktops: a PEM file of CAs that servers' certificates may be signed by, where the proxy adds credentials (repeat it)",
      collect,
    )
    .option(
      "--egress-gate <ipv4>",
      "caged Kubernetes desktops: an address of this host that the cluster's Pods reach, where their egress gates listen",
      ipv4Address,
    );
  browserAccessOptions(serve).action(async (opts) => {
    const log = createLogger({ level: opts.logLevel, name: "host" });
    const grace = Number(opts.stopGrace);
    if (!Number.isFinite(grace) || grace < 0) throw new Error("--stop-grace: expected a number of seconds");
    const leaseSeconds = Number(opts.leaseDuration);
    if (!Number.isInteger(leaseSeconds) || leaseSeconds < 1 || leaseSeconds > 3600) {
      throw new Error("--lease-duration: expected a whole number of seconds from 1 to 3600");
    }
    const token = opts.tokenFile ? readTokenFile(opts.tokenFile) : process.env[HOST_TOKEN_ENV] || undefined;
    const e2bKeys = process.env[E2B_API_KEYS_ENV];
    // QEMU and the other children have no use for them.
    delete process.env[HOST_TOKEN_ENV];
    delete process.env[E2B_API_KEYS_ENV];
    // Loaded here so that the other commands do not carry the host service in memory.
    const { startHostService } = await import("../host/server.js");
    const server = await startHostService({
      host: opts.host,
      port: opts.port,
      log,
      stopGraceMs: grace * 1000,
      loopbackNetwork: opts.vmNetwork,
      token,
      noAuth: !opts.auth,
      defaultRuntime: opts.runtime,
      containerEngine: opts.containerEngine,
      desktopImage: opts.desktopImage,
      containerUlimits: opts.containerUlimit,
      containerPorts: opts.containerPorts,
      desktopKeys: opts.desktopKeys,
      ...(opts.e2bPort !== undefined && {
        e2b: {
          port: opts.e2bPort,
          host: opts.e2bHost,
          apiKeyFile: opts.e2bApiKeyFile,
          env: { [E2B_API_KEYS_ENV]: e2bKeys },
          domain: opts.e2bDomain,
          runtime: opts.e2bRuntime,
          desktopTemplateImage: opts.e2bDesktopImage,
        },
      }),
      egressResolvers: opts.egressResolver,
      egressTrust: (opts.egressTrust as string[] | undefined)?.map((file) => readFileSync(file, "utf8")),
      egressGate: opts.egressGate,
      ...((opts.kubeconfig ||
        opts.namespace ||
        opts.kubernetesReach ||
        opts.kubernetesPodSecurity ||
        opts.poolsInCluster) && {
        kubernetes: {
          kubeconfig: opts.kubeconfig,
          namespace: opts.namespace,
          reach: opts.kubernetesReach,
          podSecurity: opts.kubernetesPodSecurity,
          poolsInCluster: opts.poolsInCluster,
          leaseDurationSeconds: leaseSeconds,
        },
      }),
      ...(opts.webhook && {
        webhooks: {
          urls: opts.webhook,
          secret: opts.webhookSecretFile ? readTokenFile(opts.webhookSecretFile) : undefined,
        },
      }),
      ...browserAccess(opts),
    });
    log.info(
      { url: server.url, settings: server.services.settings.file, auth: token ? "token" : "none" },
      "host service listening",
    );
    process.stdout.write(
      `Hangar host service on ${server.url} (${token ? "token required" : "no token"}; ` +
        `settings ${server.services.settings.file})\n`,
    );
    if (server.e2b) {
      log.info({ url: server.e2b.url, domain: server.e2b.domain }, "E2B API listening");
      process.stdout.write(`E2B API on ${server.e2b.url} (sandbox domain ${server.e2b.domain})\n`);
    }
    onShutdown(async () => {
      log.info("shutting down (running VMs keep running)");
      await server.close();
    });
  });
}
