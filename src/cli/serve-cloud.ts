/** `hangar serve`'s cloud mode and TLS: from flags and environment to server options. */
import type { Logger } from "../common/logger.js";
import { resolveCloudAuth } from "../computer/auth/config.js";
import { API_KEYS_ENV, API_KEYS_FD_ENV } from "../computer/auth/key-env.js";
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
