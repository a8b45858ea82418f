/** `hangar serve`'s cloud mode and TLS: from flags and environment to server options. */
import { spawn } from "node:child_process";
import type { Logger } from "../common/logger.js";
import { API_KEYS_ENV, API_KEYS_FD_ENV, resolveCloudAuth } from "../computer/auth/config.js";
import type { ComputerServerOptions } from "../computer/server.js";
import {
  certificateFingerprint,
  defaultTlsDir,
  ensureSelfSignedCertificate,
  loadTlsFiles,
} from "../computer/tls.js";

export interface CloudFlags {
  cloud?: boolean;
  containerName?: string;
  apiKeyFile?: string;
  authUrl?: string;
  tlsCert?: string;
  tlsKey?: string;
  sslCertfile?: string;
  sslKeyfile?: string;
  insecureHttp?: boolean;
}

export async function cloudServeOptions(
  flags: CloudFlags,
  log: Logger,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Pick<ComputerServerOptions, "cloud" | "tls">> {
  const cloud = await resolveCloudAuth({
    containerName: flags.containerName,
    apiKeyFile: flags.apiKeyFile,
    authUrl: flags.authUrl,
    env,
  });
  // Keys are held hashed by the server; the variable must not reach the commands agents run.
  delete env[API_KEYS_ENV];
  delete env[API_KEYS_FD_ENV];
  // The verifier's URL may carry credentials: the server holds it, its commands do not get it.
  delete env.HANGAR_AUTH_URL;
  if (flags.cloud && !cloud) {
    throw new Error(
      "--cloud needs a container name (--container-name or CONTAINER_NAME) and API keys " +
        "(--api-key-file or HANGAR_API_KEYS) or --auth-url",
    );
  }
  let certPath = flags.tlsCert ?? flags.sslCertfile;
  let keyPath = flags.tlsKey ?? flags.sslKeyfile;
  if (Boolean(certPath) !== Boolean(keyPath)) {
    throw new Error("TLS needs both --tls-cert and --tls-key (or --ssl-certfile and --ssl-keyfile)");
  }
  if (!certPath && flags.cloud) {
    const made = await ensureSelfSignedCertificate({ dir: defaultTlsDir(), names: [cloud!.containerName] });
    ({ certPath, keyPath } = made);
    log.info({ cert: made.certPath, created: made.created }, "using a self-signed TLS certificate");
  }
  const tls = certPath && keyPath ? await loadTlsFiles(certPath, keyPath) : undefined;
  if (tls) {
    const fingerprint = certificateFingerprint(tls.cert);
    log.info({ fingerprint }, "TLS certificate SHA-256 fingerprint");
    process.stdout.write(`TLS certificate SHA-256 fingerprint: ${fingerprint}\n`);
  }
  if (cloud && !tls) {
    log.warn(
      flags.insecureHttp
        ? "API keys over plain HTTP (--insecure-http): anyone on the network path can read them"
        : "API keys over plain HTTP: add --cloud (or a certificate) for TLS, or --insecure-http to say it is meant",
    );
  }
  if (cloud)
    log.info(
      { containerName: cloud.containerName, verifier: Boolean(cloud.verify) },
      "cloud mode: API keys required",
    );
  return { cloud, tls };
}

/** The descriptor on which a relaunched server reads the keys its launcher had in `HANGAR_API_KEYS`. */
const KEYS_FD = 3;

/**
 * Keeps `HANGAR_API_KEYS` out of the server's process: deleting it from `process.env` leaves it in
 * `/proc/<pid>/environ`, which every command the server runs could read. When the variable is set,
 * this runs the same command line again in a child whose environment lacks it, hands the keys over
 * a pipe, passes SIGTERM and SIGHUP on, and exits with the child's status. Resolves false when there
 * is nothing to hide (the caller serves), and never resolves otherwise.
 *
 * The launcher itself keeps the variable, as does any process above it (a container's PID 1):
 * deployments pass keys in a mounted file (`--api-key-file`) instead; see docs/deploy.md.
 */
export function relaunchWithoutKeysInEnvironment(env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const keys = env[API_KEYS_ENV];
  if (!keys) return Promise.resolve(false);
  const childEnv: NodeJS.ProcessEnv = { ...env, [API_KEYS_FD_ENV]: String(KEYS_FD) };
  delete childEnv[API_KEYS_ENV];
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    env: childEnv,
    stdio: ["inherit", "inherit", "inherit", "pipe"],
  });
  const pipe = child.stdio[KEYS_FD] as NodeJS.WritableStream & { on(e: "error", l: () => void): void };
  pipe.on("error", () => undefined);
  pipe.end(keys);
  const forward = (signal: NodeJS.Signals) => () => child.kill(signal);
  process.on("SIGTERM", forward("SIGTERM"));
  process.on("SIGHUP", forward("SIGHUP"));
  // Ctrl-C reaches the child from the terminal already; the launcher only waits for it to stop.
  process.on("SIGINT", () => undefined);
  return new Promise<boolean>(() => {
    child.on("error", (err) => {
      process.stderr.write(`hangar: cannot start the server: ${err.message}\n`);
      process.exit(1);
    });
    child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 + signalNumber(signal) : 1)));
  });
}

function signalNumber(signal: NodeJS.Signals): number {
  return ({ SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 } as Record<string, number>)[signal] ?? 0;
}
