/**
 * What the desktop container runs, read from its environment and arguments: the screen size, VNC,
 * and the `hangar serve` command line (cloud secrets mounted as files are found and passed as flags).
 *
 *   HANGAR_DISPLAY=1280x800        the virtual screen
 *   HANGAR_HOST=0.0.0.0            where the computer server (and noVNC) listen
 *   HANGAR_TLS_CERT, HANGAR_TLS_KEY  the certificate and key as PEM text: written to private files
 *                                  under $TMPDIR/hangar/tls → --tls-cert/--tls-key (port 8443)
 *   HANGAR_SECRETS_DIR=/run/secrets/hangar
 *       tls/tls.crt + tls/tls.key  → --tls-cert/--tls-key (then the port is 8443)
 *       api-keys (a file, one key a line) or api-keys/keys → --api-key-file
 *   API keys (a key file, HANGAR_API_KEYS) or an auth URL (HANGAR_AUTH_URL) → cloud mode: --cloud,
 *   HTTPS on 8443, with a self-signed certificate for CONTAINER_NAME when none is given; plain HTTP
 *   with keys only with --insecure-http.
 *   HANGAR_VNC=1                   VNC on 127.0.0.1:HANGAR_VNC_PORT (5900) and noVNC on
 *                                  HANGAR_NOVNC_PORT (6080), with the password in
 *                                  HANGAR_VNC_PASSWORD_FILE or HANGAR_VNC_PASSWORD (x11vnc runs
 *                                  while a viewer is connected, vnc.ts)
 *   HANGAR_OSWORLD=5000            OSWorld's controller API on this port (`--osworld`, docs/osworld.md);
 *                                  the image sets 5000, `off` turns it off
 *   HANGAR_EXTERNAL_DISPLAY=:0     the desktop is someone else's to start (E2B's `desktop` template:
 *                                  @e2b/desktop starts Xvfb and Xfce there through envd): no virtual
 *                                  display, apps or VNC here (HANGAR_VNC is ignored: the SDK's own
 *                                  x11vnc and noVNC take 5900 and 6080), and the server drives that
 *                                  display once it appears
 *   HANGAR_ENVD=49983              E2B's envd on this port (`--envd-port`, docs/e2b.md); off unless set;
 *                                  its access token from the secrets directory's `envd-token` file
 *                                  (→ `--envd-token-file`), which it needs beyond loopback; without
 *                                  one, envd listens on the container's loopback only (the host
 *                                  service's E2B plane reaches it through GET /tunnel/{port})
 *   HANGAR_COMMAND_USER=hangar     started as root (`--user 0`), the server stays root and the agent's
 *                                  processes, files, desktop and browser are this user's
 *                                  (`--command-user`): the agent cannot signal, trace or read the
 *                                  server; `off` runs everything as root. Ignored when not root.
 *   CONTAINER_NAME is read by `hangar serve` itself; HANGAR_API_KEYS and HANGAR_AUTH_URL reach only
 *   the server (main.ts), never the desktop or the commands.
 * Flags given as arguments win over the environment, which wins over the mounted files.
 */
import { accessSync, constants, existsSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const DEFAULT_SECRETS_DIR = "/run/secrets/hangar";
/** The container's own secrets: used here, never passed on to the server (whose commands see its environment). */
export const CONTAINER_SECRET_VARS = ["HANGAR_TLS_CERT", "HANGAR_TLS_KEY", "HANGAR_VNC_PASSWORD"];
/** Secrets only the server gets (the keys over a pipe): removed from everything else the entrypoint starts. */
export const SERVER_SECRET_VARS = ["HANGAR_API_KEYS", "HANGAR_AUTH_URL"];
export const LOCAL_PORT = 8000;
export const TLS_PORT = 8443;

export interface VncSettings {
  port: number;
  webPort: number;
  password: string;
}

export interface ContainerSettings {
  width: number;
  height: number;
  host: string;
  vnc?: VncSettings;
  /** The display another program starts (`HANGAR_EXTERNAL_DISPLAY`), instead of a virtual one here. */
  externalDisplay?: string;
  /** Arguments after `hangar` (starting with `serve`). */
  serveArgs: string[];
  /** The user the desktop and the agent's processes run as, when the container runs as root. */
  commandUser?: string;
  /** Where the HEALTHCHECK asks, `http(s)://127.0.0.1:<port>` (it adds `/status`). */
  healthOrigin: string;
  /** Files to write (mode 0600) before the server starts: the certificate and key from the environment. */
  privateFiles: { path: string; content: string }[];
  /** Cloud mode without a certificate: make a self-signed one for this container name. */
  selfSignedFor?: string;
  /** The certificate and key the server uses, when known before it starts (noVNC uses them too). */
  tlsFiles?: { cert: string; key: string };
  /** Keys with plain HTTP (--insecure-http): noVNC stays on loopback. */
  insecureHttp: boolean;
}

/**
 * @param uid the entry point's uid: as root (0), the agent's processes get a user of their own
 *   (`HANGAR_COMMAND_USER`); undefined leaves that out.
 */
export function containerSettings(env: NodeJS.ProcessEnv, args: string[], uid?: number): ContainerSettings {
  const [width, height] = parseScreen(env.HANGAR_DISPLAY ?? "1280x800");
  const host = env.HANGAR_HOST || "0.0.0.0";
  const secrets = env.HANGAR_SECRETS_DIR || DEFAULT_SECRETS_DIR;
  const given = flagNames(args);

  const extra: string[] = [];
  const privateFiles: ContainerSettings["privateFiles"] = [];
  const cert = join(secrets, "tls", "tls.crt");
  const key = join(secrets, "tls", "tls.key");
  if (Boolean(env.HANGAR_TLS_CERT) !== Boolean(env.HANGAR_TLS_KEY)) {
    throw new Error("HANGAR_TLS_CERT and HANGAR_TLS_KEY go together: set both or neither");
  }
  const certInArgs = given.has("--tls-cert") || given.has("--ssl-certfile");
  if (!certInArgs && env.HANGAR_TLS_CERT && env.HANGAR_TLS_KEY) {
    const dir = join(env.TMPDIR || tmpdir(), "hangar", "tls");
    privateFiles.push(
      { path: join(dir, "cert.pem"), content: env.HANGAR_TLS_CERT },
      { path: join(dir, "key.pem"), content: env.HANGAR_TLS_KEY },
    );
    extra.push("--tls-cert", privateFiles[0].path, "--tls-key", privateFiles[1].path);
  } else if (!certInArgs && existsSync(cert) && existsSync(key)) {
    extra.push("--tls-cert", readable(cert), "--tls-key", readable(key));
  }
  const keyFile = join(secrets, "api-keys");
  const keys = existsSync(keyFile) && statSync(keyFile).isDirectory() ? join(keyFile, "keys") : keyFile;
  if (!given.has("--api-key-file") && existsSync(keys)) extra.push("--api-key-file", readable(keys));

  const insecureHttp = given.has("--insecure-http");
  const all = [...args, ...extra];
  const withKeys =
    ["--api-key-file", "--auth-url"].some((flag) => flagNames(all).has(flag)) ||
    Boolean(env.HANGAR_API_KEYS || env.HANGAR_AUTH_URL);
  if (withKeys && !insecureHttp && !flagNames(all).has("--cloud")) all.push("--cloud");
  const names = flagNames(all);
  const tls = ["--tls-cert", "--ssl-certfile", "--cloud"].some((flag) => names.has(flag));
  let tlsFiles: ContainerSettings["tlsFiles"];
  let selfSignedFor: string | undefined;
  if (names.has("--tls-cert") || names.has("--ssl-certfile")) {
    const certPath = flagValue(all, "--tls-cert") ?? flagValue(all, "--ssl-certfile");
    const keyPath = flagValue(all, "--tls-key") ?? flagValue(all, "--ssl-keyfile");
    if (certPath && keyPath) tlsFiles = { cert: certPath, key: keyPath };
  } else if (names.has("--cloud")) {
    selfSignedFor = flagValue(all, "--container-name") ?? env.CONTAINER_NAME;
  }
  const port = given.has("--port") ? Number(flagValue(args, "--port")) : tls ? TLS_PORT : LOCAL_PORT;
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new Error(`--port must be a port number from 1 to 65535, not ${flagValue(args, "--port")}`);
  }
  const serveArgs = ["serve", ...(given.has("--host") ? [] : ["--host", host])];
  serveArgs.push(...(given.has("--port") ? [] : ["--port", String(port)]), ...all);
  // The container's own desktop is there once the server listens: its first screenshot is made warm.
  if (!env.HANGAR_EXTERNAL_DISPLAY && !given.has("--warm-up")) serveArgs.push("--warm-up");
  // A listener the image may add, on the port its variable names (or `off`), unless a flag gives it.
  for (const [variable, flag] of [
    ["HANGAR_OSWORLD", "--osworld"],
    ["HANGAR_ENVD", "--envd-port"],
  ] as const) {
    const value = env[variable];
    if (!value || value === "off" || given.has(flag)) continue;
    const listenerPort = Number(value);
    if (!Number.isInteger(listenerPort) || listenerPort <= 0 || listenerPort > 65535) {
      throw new Error(`${variable} must be a port number from 1 to 65535 or off, not ${value}`);
    }
    serveArgs.push(flag, String(listenerPort));
  }
  const envdToken = join(secrets, "envd-token");
  if (flagNames(serveArgs).has("--envd-port") && !given.has("--envd-token-file") && existsSync(envdToken)) {
    serveArgs.push("--envd-token-file", readable(envdToken));
  } else if (
    flagNames(serveArgs).has("--envd-port") &&
    !given.has("--envd-token-file") &&
    !given.has("--envd-host")
  ) {
    // No token: envd stays on the container's loopback, where the host service reaches it through
    // the computer server's tunnel and hands it the sandbox's token with the first /init.
    serveArgs.push("--envd-host", "127.0.0.1");
  }

  // Started as root: the server keeps root, everything the agent runs is the desktop user's.
  let commandUser = flagValue(serveArgs, "--command-user");
  const named = env.HANGAR_COMMAND_USER || "hangar";
  if (!commandUser && uid === 0 && named !== "off") {
    commandUser = named;
    serveArgs.push("--command-user", named);
  }

  const externalDisplay = env.HANGAR_EXTERNAL_DISPLAY || undefined;
  if (externalDisplay && !/^:\d+$/.test(externalDisplay)) {
    throw new Error(`HANGAR_EXTERNAL_DISPLAY must be a local display such as :0, not "${externalDisplay}"`);
  }

  return {
    width,
    height,
    host,
    externalDisplay,
    vnc: env.HANGAR_VNC === "1" && !externalDisplay ? vncSettings(env) : undefined,
    serveArgs,
    commandUser,
    healthOrigin: `${tls ? "https" : "http"}://127.0.0.1:${port}`,
    privateFiles,
    selfSignedFor,
    tlsFiles,
    insecureHttp,
  };
}

/** A mounted secret's path, or an error that says how to make it readable for the container's user. */
function readable(path: string): string {
  try {
    accessSync(path, constants.R_OK);
    return path;
  } catch (err) {
    const info = statSync(path);
    const uid = process.getuid?.() ?? "?";
    throw new Error(
      `cannot read ${path} (${(err as NodeJS.ErrnoException).code}; mode ${(info.mode & 0o777).toString(8).padStart(4, "0")}, ` +
        `owner ${info.uid}:${info.gid}) as uid ${uid}: make it readable by the container's user, e.g. ` +
        `chmod 0640 on the host and docker run --group-add ${info.gid} (the file's group), ` +
        "or a Kubernetes secret with defaultMode 0440 and fsGroup 10001 (docs/deploy.md)",
    );
  }
}

function vncSettings(env: NodeJS.ProcessEnv): VncSettings {
  let password = env.HANGAR_VNC_PASSWORD ?? "";
  if (env.HANGAR_VNC_PASSWORD_FILE) {
    try {
      password = readFileSync(env.HANGAR_VNC_PASSWORD_FILE, "utf8").split("\n")[0].trim();
    } catch (err) {
      throw new Error(`cannot read HANGAR_VNC_PASSWORD_FILE: ${(err as Error).message}`);
    }
  }
  if (!password) {
    throw new Error("HANGAR_VNC=1 needs a password: set HANGAR_VNC_PASSWORD_FILE or HANGAR_VNC_PASSWORD");
  }
  return {
    port: parsePortVar(env, "HANGAR_VNC_PORT", 5900),
    webPort: parsePortVar(env, "HANGAR_NOVNC_PORT", 6080),
    password,
  };
}

function parseScreen(value: string): [number, number] {
  const match = /^(\d{2,5})x(\d{2,5})$/.exec(value.trim());
  if (!match) throw new Error(`HANGAR_DISPLAY must be WIDTHxHEIGHT, e.g. 1280x800, not "${value}"`);
  return [Number(match[1]), Number(match[2])];
}

function parsePortVar(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const value = env[name];
  if (value === undefined || value === "") return fallback;
  const port = Number(value);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) {
    throw new Error(`${name} must be a port number from 1 to 65535, not "${value}"`);
  }
  return port;
}

function flagNames(args: string[]): Set<string> {
  return new Set(args.filter((a) => a.startsWith("--")).map((a) => a.split("=")[0]));
}

function flagValue(args: string[], flag: string): string | undefined {
  const i = args.findIndex((a) => a === flag || a.startsWith(`${flag}=`));
  if (i < 0) return undefined;
  return args[i].includes("=") ? args[i].slice(flag.length + 1) : args[i + 1];
}
