/**
 * TLS for the computer server: certificate files given by the user, or a self-signed certificate
 * made once with the `openssl` command line (Node has no X.509 writer) and reused on later starts.
 */
import { execFile } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile } from "node:fs/promises";
import { homedir, hostname } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

export interface TlsFiles {
  cert: Buffer;
  key: Buffer;
}

/** Reads a certificate and its key; throws naming the file that is missing or not PEM. */
export async function loadTlsFiles(certPath: string, keyPath: string): Promise<TlsFiles> {
  const read = async (path: string, what: string, marker: RegExp) => {
    let data: Buffer;
    try {
      data = await readFile(path);
    } catch (err) {
      throw new Error(`cannot read the TLS ${what} ${path}: ${(err as Error).message}`);
    }
    if (!marker.test(data.toString("latin1"))) throw new Error(`the TLS ${what} ${path} is not a PEM file`);
    return data;
  };
  const cert = await read(certPath, "certificate", /-----BEGIN CERTIFICATE-----/);
  const key = await read(keyPath, "key", /-----BEGIN [A-Z ]*PRIVATE KEY-----/);
  return { cert, key };
}

/** `AB:CD:…`, the SHA-256 fingerprint people compare with what their client shows. */
export function certificateFingerprint(cert: Buffer | string): string {
  return new X509Certificate(cert).fingerprint256;
}

/** Where `serve --cloud` keeps its self-signed certificate (XDG state directory). */
export function defaultTlsDir(): string {
  const state = process.env.XDG_STATE_HOME || join(homedir(), ".local", "state");
  return join(state, "hangar", "tls");
}

export interface SelfSignedOptions {
  /** Directory for `cert.pem` and `key.pem`; an existing pair there is reused. */
  dir: string;
  /** Extra DNS names (e.g. the container name); localhost, loopback IPs and the host name are always in. */
  names?: string[];
  days?: number;
}

/** Makes (or reuses) a self-signed ECDSA P-256 certificate; returns the paths. */
export async function ensureSelfSignedCertificate(
  options: SelfSignedOptions,
): Promise<{ certPath: string; keyPath: string; created: boolean }> {
  const certPath = join(options.dir, "cert.pem");
  const keyPath = join(options.dir, "key.pem");
  if (existsSync(certPath) && existsSync(keyPath)) return { certPath, keyPath, created: false };
  await mkdir(options.dir, { recursive: true, mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
    throw new Error(
      `cannot create ${options.dir} for the self-signed certificate (${err.code ?? err.message}): ` +
        "set XDG_STATE_HOME to a writable directory, or give a certificate with --tls-cert and --tls-key",
    );
  });
  const dnsNames = [...new Set(["localhost", hostname(), ...(options.names ?? [])])].filter(isDnsName);
  const san = [...dnsNames.map((n) => `DNS:${n}`), "IP:127.0.0.1", "IP:::1"].join(",");
  try {
    await promisify(execFile)(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-sha256",
        "-days",
        String(options.days ?? 825),
        "-subj",
        "/CN=hangar computer server",
        "-addext",
        `subjectAltName=${san}`,
        "-keyout",
        keyPath,
        "-out",
        certPath,
      ],
      { timeout: 30_000 },
    );
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === "ENOENT") throw new Error("making a self-signed certificate needs the openssl command");
    throw new Error(`openssl could not make a certificate: ${e.stderr?.trim() || e.message}`);
  }
  await chmod(keyPath, 0o600);
  return { certPath, keyPath, created: true };
}

function isDnsName(name: string): boolean {
  return /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(
    name,
  );
}
