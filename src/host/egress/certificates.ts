/**
 * Certificates for the egress proxy's credential rules (docs/egress.md): a CA of each desktop's
 * own, which Hangar installs in that desktop's trust stores, and a certificate per domain signed by
 * it, with which the proxy answers the desktop for the domains whose requests get a credential.
 *
 * Keys are made by node:crypto (P-256) and written to files of mode 0600 before `openssl` (the
 * Debian package, already a dependency of the image) signs with them: no key is ever on a command
 * line or in an environment. Node cannot write X.509 certificates, hence `openssl`.
 */
import { execFile } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { makeOwnedTempDir } from "../../os/owned-temp-dir.js";

const run = promisify(execFile);

export interface CertificateFiles {
  /** PEM certificate (public). */
  cert: string;
  /** PEM private key, mode 0600. */
  key: string;
}

/** How long the certificates last: a desktop's CA ten years, a domain's one year (renewed when older). */
const CA_DAYS = 3650;
const LEAF_DAYS = 365;

async function newKey(path: string) {
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  await writeFile(path, privateKey.export({ type: "pkcs8", format: "pem" }), { mode: 0o600, flag: "w" });
}

async function openssl(args: string[]) {
  try {
    await run("openssl", args, { timeout: 30_000 });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === "ENOENT") throw new Error("Credential rules need `openssl` on the host (Debian: openssl)");
    throw new Error(`openssl ${args[0]} failed: ${(e.stderr || e.message).trim()}`);
  }
}

/**
 * How far back a certificate's validity starts: a desktop whose clock is behind the host's (a guest
 * just booted under emulation, a fork before its clock is set) would refuse one valid from now.
 */
const BACKDATE_MS = 2 * 86_400_000;

/** A time as `openssl ca` takes it (GeneralizedTime, UTC). */
function asn1Time(ms: number): string {
  return `${new Date(ms).toISOString().replace(/[-:T]/g, "").slice(0, 14)}Z`;
}

/**
 * Signs the request `csr` into `out`, valid from two days ago for `days`, with the extensions in the
 * file `extensions`: by `issuer`, or by the request's own key (`selfSignKey`). `openssl x509` and
 * `req` start a certificate now and cannot say otherwise here (OpenSSL 3.0); `openssl ca` can, with
 * a database of its own, made in a temporary directory and removed.
 */
async function signBackdated(options: {
  csr: string;
  out: string;
  days: number;
  extensions: string;
  issuer?: CertificateFiles;
  selfSignKey?: string;
}) {
  // An owned temporary directory (os/owned-temp-dir.ts): one a killed service left goes at the next signing.
  const work = await makeOwnedTempDir("hangar-ca-");
  try {
    await writeFile(join(work, "index.txt"), "");
    // A random serial, as browsers want each certificate of an issuer to have its own.
    await writeFile(join(work, "serial"), `${randomBytes(12).toString("hex")}\n`);
    const config = join(work, "ca.cnf");
    await writeFile(
      config,
      [
        "[ca]",
        "default_ca = signer",
        "[signer]",
        `database = ${join(work, "index.txt")}`,
        `new_certs_dir = ${work}`,
        `serial = ${join(work, "serial")}`,
        "default_md = sha256",
        "policy = any",
        "unique_subject = no",
        "copy_extensions = none",
        "email_in_dn = no",
        "[any]",
        "commonName = supplied",
        "",
      ].join("\n"),
    );
    const now = Date.now();
    await openssl([
      "ca",
      "-batch",
      "-notext",
      "-config",
      config,
      "-in",
      options.csr,
      "-out",
      options.out,
      "-startdate",
      asn1Time(now - BACKDATE_MS),
      "-enddate",
      asn1Time(now + options.days * 86_400_000),
      "-extfile",
      options.extensions,
      ...(options.issuer
        ? ["-cert", options.issuer.cert, "-keyfile", options.issuer.key]
        : ["-selfsign", "-keyfile", options.selfSignKey ?? ""]),
    ]);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The CA in `dir` (`ca.crt`, `ca.key`), made when it is not there yet. */
export async function ensureCa(dir: string, commonName: string): Promise<CertificateFiles> {
  const files = { cert: join(dir, "ca.crt"), key: join(dir, "ca.key") };
  if (await exists(files.cert)) return files;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await newKey(files.key);
  const nonce = randomBytes(6).toString("hex");
  const request = join(dir, `ca.${nonce}.csr`);
  const extensions = join(dir, `ca.${nonce}.ext`);
  try {
    await writeFile(
      extensions,
      "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n",
      { mode: 0o600 },
    );
    await openssl([
      "req",
      "-new",
      "-key",
      files.key,
      "-out",
      request,
      "-subj",
      `/CN=${commonName.replace(/[/=+\\]/g, "_")}`,
    ]);
    // Written beside, then renamed: a CA file is whole or absent.
    const made = `${files.cert}.${nonce}.tmp`;
    await signBackdated({ csr: request, out: made, days: CA_DAYS, extensions, selfSignKey: files.key });
    await rename(made, files.cert);
  } finally {
    await rm(request, { force: true });
    await rm(extensions, { force: true });
  }
  return files;
}

/** A certificate for `name` (a domain or an address) signed by `ca`, kept in `dir`. */
export async function ensureLeaf(ca: CertificateFiles, dir: string, name: string): Promise<CertificateFiles> {
  const base = join(dir, name.replace(/[^a-z0-9.-]/gi, "_"));
  const files = { cert: `${base}.crt`, key: `${base}.key` };
  const made = await stat(files.cert).catch(() => undefined);
  if (made && Date.now() - made.mtimeMs < (LEAF_DAYS - 30) * 86_400_000) return files;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await newKey(files.key);
  const nonce = randomBytes(6).toString("hex");
  const request = `${base}.${nonce}.csr`;
  const extensions = `${base}.${nonce}.ext`;
  const san = isIP(name) ? `IP:${name}` : `DNS:${name}`;
  try {
    await writeFile(
      extensions,
      `subjectAltName=${san}\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n`,
      { mode: 0o600 },
    );
    await openssl(["req", "-new", "-key", files.key, "-out", request, "-subj", `/CN=${name}`]);
    await signBackdated({ csr: request, out: files.cert, days: LEAF_DAYS, extensions, issuer: ca });
  } finally {
    await rm(request, { force: true });
    await rm(extensions, { force: true });
  }
  return files;
}

/** The PEM texts of a pair of files. */
export async function readPair(files: CertificateFiles): Promise<{ cert: string; key: string }> {
  return { cert: await readFile(files.cert, "utf8"), key: await readFile(files.key, "utf8") };
}

async function exists(path: string) {
  return stat(path).then(
    () => true,
    () => false,
  );
}
