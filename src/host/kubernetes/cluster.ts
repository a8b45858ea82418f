/**
 * The cluster a Kubernetes runtime works in: its kubeconfig, resolved as kubectl does (an explicit
 * `--kubeconfig`, else `KUBECONFIG`, else `~/.kube/config`, else the in-cluster service account),
 * the namespace (`--namespace`, else the kubeconfig context's, else the service account's, else
 * `default`), the API clients, and the API server's failures as `HostError`s in words an operator
 * can act on (a 403 names what the Role lacks).
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig, NetworkingV1Api } from "@kubernetes/client-node";
import { HostError } from "../errors.js";

const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
/** Namespace names are DNS-1123 labels. */
const NAMESPACE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export interface ClusterOptions {
  /** A kubeconfig file (`--kubeconfig`); default `KUBECONFIG`, `~/.kube/config`, then in-cluster. */
  kubeconfig?: string;
  /** The namespace desktops live in (`--namespace`). */
  namespace?: string;
}

export interface Cluster {
  config: KubeConfig;
  core: CoreV1Api;
  networking: NetworkingV1Api;
  namespace: string;
  /** The API server's address, for messages. */
  server: string;
  /** True when the credentials are the Pod's own service account. */
  inCluster: boolean;
}

export function connectCluster(options: ClusterOptions, env: NodeJS.ProcessEnv = process.env): Cluster {
  const config = new KubeConfig();
  let inCluster = false;
  const file = options.kubeconfig ?? firstConfigFile(env.KUBECONFIG) ?? defaultConfigFile();
  if (file) {
    if (!existsSync(file)) throw new Error(`the kubeconfig ${file} does not exist`);
    try {
      config.loadFromFile(file);
    } catch (err) {
      throw new Error(`the kubeconfig ${file} cannot be read: ${(err as Error).message}`);
    }
  } else if (env.KUBERNETES_SERVICE_HOST && existsSync(join(SERVICE_ACCOUNT_DIR, "token"))) {
    config.loadFromCluster();
    inCluster = true;
  } else {
    throw new Error(
      "no Kubernetes configuration: give --kubeconfig FILE, set KUBECONFIG, or run the host service in a Pod with a service account",
    );
  }
  const cluster = config.getCurrentCluster();
  if (!cluster) throw new Error("the kubeconfig has no current cluster (kubectl config use-context NAME)");
  const namespace =
    options.namespace ??
    config.getContextObject(config.getCurrentContext())?.namespace ??
    (inCluster ? readServiceAccountNamespace() : undefined) ??
    "default";
  if (!NAMESPACE.test(namespace)) {
    throw new Error(`invalid namespace '${namespace}': lowercase letters, digits and '-', at most 63`);
  }
  return {
    config,
    core: config.makeApiClient(CoreV1Api),
    networking: config.makeApiClient(NetworkingV1Api),
    namespace,
    server: cluster.server,
    inCluster,
  };
}

function firstConfigFile(list: string | undefined): string | undefined {
  return list?.split(":").find((path) => path.length > 0);
}

function defaultConfigFile(): string | undefined {
  const file = join(homedir(), ".kube", "config");
  return existsSync(file) ? file : undefined;
}

function readServiceAccountNamespace(): string | undefined {
  try {
    return readFileSync(join(SERVICE_ACCOUNT_DIR, "namespace"), "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The API server's HTTP status on a failed call, or undefined (not an answer of the API server). */
export function statusCode(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown };
  if (typeof e.code === "number") return e.code;
  if (typeof e.statusCode === "number") return e.statusCode;
  return undefined;
}

/** The API server's own words on a failed call (its Status `message`), else the error's. */
export function apiMessage(err: unknown): string {
  const body = (err as { body?: unknown }).body;
  let parsed: unknown = body;
  if (typeof body === "string") {
    try {
      parsed = JSON.parse(body);
    } catch {
      parsed = undefined;
    }
  }
  const message = (parsed as { message?: unknown } | undefined)?.message;
  if (typeof message === "string" && message) return message;
  const text = (err as Error).message ?? String(err);
  return text.split("\n")[0];
}

const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENOTFOUND",
]);

/**
 * Turns a failed API call into a `HostError`: an API server that cannot be reached is
 * `unavailable`, a 403 says which permission the host service's Role lacks, a 404 is `not_found`,
 * a 422 (the object was refused) `invalid_params`, anything else a failed operation.
 */
export function clusterError(err: unknown, cluster: Cluster, doing: string): HostError {
  if (err instanceof HostError) return err;
  const code = (err as NodeJS.ErrnoException).code ?? (err as { cause?: { code?: string } }).cause?.code;
  const status = statusCode(err);
  if (status === undefined && typeof code === "string" && UNREACHABLE.has(code)) {
    return new HostError(
      "unavailable",
      `The Kubernetes API server at ${cluster.server} does not answer (${code}) while ${doing}`,
    );
  }
  if (status === undefined && /ECONNREFUSED|socket hang up|ECONNRESET/.test(String(err))) {
    return new HostError(
      "unavailable",
      `The Kubernetes API server at ${cluster.server} does not answer while ${doing}`,
    );
  }
  const message = apiMessage(err);
  if (status === 401) {
    return new HostError(
      "unavailable",
      `The Kubernetes API server refused the host service's credentials while ${doing}: ${message}`,
    );
  }
  if (status === 403) {
    return new HostError(
      "failed",
      `Kubernetes forbids ${doing} in namespace ${cluster.namespace}: ${message} ` +
        "(the host service's Role must allow it: see deploy/kubernetes/host/role.yaml)",
    );
  }
  if (status === 404) return new HostError("not_found", `${doing}: ${message}`);
  if (status === 422) return new HostError("invalid_params", `${doing}: ${message}`);
  return new HostError("failed", `${doing} failed: ${message}`);
}
