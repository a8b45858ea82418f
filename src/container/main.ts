/**
 * The desktop container's entrypoint (PID 1 is tini, which reaps the clipboard helpers' exited
 * children): a virtual desktop with the accessibility bus, VNC when asked, then the computer server
 * (`hangar serve` with the container's arguments) in this same process, so that the container runs
 * one Node runtime, not two (a second one held about 24 MB of the container's memory). SIGTERM stops
 * the server, then VNC, then the desktop.
 *
 * The memory settings of `hangar serve` (src/common/memory-env.ts) are the image's: its ENTRYPOINT
 * gives V8's flag and its environment preloads jemalloc; they are taken out of the environment at
 * once, so the desktop, its apps and the commands run with the system's allocator.
 *
 * API keys and the auth URL given in the environment are taken out of this process's environment
 * before anything starts, so the desktop, VNC and every app and command lack them. With keys in the
 * environment the server runs as a child process instead, which gets them over a pipe
 * (HANGAR_API_KEYS_FD) and so lacks them in /proc/<pid>/environ; this process and tini (PID 1) keep
 * them there: the mounted key file is the way that leaves no copy (docs/deploy.md).
 *
 *   node dist/cli/container.js [hangar serve flags…]   (bundled by scripts/bundle-cli.mjs)
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { constants, existsSync } from "node:fs";
import { access, chmod, chown, lstat, mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir, userInfo } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { onShutdown } from "../cli/util.js";
import { EGRESS_CA_IN_DESKTOP, TRUST_IN_NSS } from "../common/egress-trust.js";
import { forgetMemorySettings, memoryEnv } from "../common/memory-env.js";
import { PACKAGE_ROOT } from "../common/version.js";
import { holdYoungGeneration, releaseYoungGeneration } from "../common/young-generation.js";
import { API_KEYS_ENV, API_KEYS_FD_ENV } from "../computer/auth/key-env.js";
import { defaultTlsDir, ensureSelfSignedCertificate } from "../computer/tls.js";
import { startDesktopApps } from "../desktop/furniture.js";
import { startVirtualDisplay } from "../desktop/virtual-display.js";
import { type CommandUser, resolveCommandUser, userEnv } from "../os/command-user.js";
import { runShell } from "../os/process.js";
import { healthOriginFile } from "./health-origin.js";
import { CONTAINER_SECRET_VARS, containerSettings, SERVER_SECRET_VARS } from "./settings.js";
import { startVnc, type VncServers } from "./vnc.js";

/** Milliseconds since this process began (Node's own start included). */
const elapsed = () => Math.round(performance.now());
const log = (message: string) => process.stdout.write(`hangar container: ${message}\n`);
/** The command line, where the package is (this module runs from the bundle, dist/cli/container.js). */
const HANGAR_BIN = join(PACKAGE_ROOT, "bin", "hangar.js");

/**
 * Runs the container; resolves with the exit code once everything has stopped, or undefined while
 * the server serves in this process (its SIGTERM handler then stops everything and exits).
 */
export async function runContainer(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<number | undefined> {
  // The command line and the server are loaded below, with the young generation held
  // (young-generation.ts): loaded with this module, they grew it for good.
  holdYoungGeneration();
  const entry = elapsed();
  forgetMemorySettings(env);
  const settings = containerSettings(env, args, process.getuid?.());
  // As root: the desktop and the agent's processes are this user's, the server stays root.
  const user = settings.commandUser === undefined ? undefined : resolveCommandUser(settings.commandUser);
  // The server's own state (its TLS, trajectories, writes' journal) is root's, not in the agent's home.
  if (user) env.HOME = await prepareForCommandUser(user);
  const serverSecrets: Record<string, string> = {};
  for (const name of [...SERVER_SECRET_VARS, ...CONTAINER_SECRET_VARS]) {
    if (env[name] && SERVER_SECRET_VARS.includes(name)) serverSecrets[name] = env[name];
    delete env[name];
  }
  if (settings.selfSignedFor) {
    const made = await ensureSelfSignedCertificate({ dir: defaultTlsDir(), names: [settings.selfSignedFor] });
    settings.tlsFiles = { cert: made.certPath, key: made.keyPath };
    settings.serveArgs.push("--tls-cert", made.certPath, "--tls-key", made.keyPath);
  }
  // The server in this process is loaded while the desktop's programs start (the module graph is a
  // few hundred ms of one core; the programs are other processes).
  const cli = serverSecrets[API_KEYS_ENV] ? undefined : import("../cli/main.js");
  let programLoaded: number | undefined;
  cli?.then(
    () => {
      programLoaded = elapsed();
    },
    () => undefined,
  );
  // Caught from the start: a stop while the desktop starts still takes everything down.
  const stopSignal = new Promise<NodeJS.Signals>((resolve) => {
    for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => resolve(signal));
  });
  // A caged desktop's egress CA, in the desktop user's NSS database before any browser starts.
  const trusted = existsSync(EGRESS_CA_IN_DESKTOP) ? trustEgressCa(env, user) : undefined;
  /** When each part of the display was up. */
  const parts: string[] = [];
  const desktop = settings.externalDisplay
    ? externalDisplay(settings.externalDisplay)
    : await startVirtualDisplay({
        width: settings.width,
        height: settings.height,
        accessibility: true,
        audio: true,
        user,
        onPart: (part) => parts.push(`${part} ${elapsed()}`),
      });
  if (desktop.audioError) log(`the desktop has no sound: ${desktop.audioError}`);
  const marks: string[] = [`entry ${entry}`, `display ${elapsed()} (${parts.join(", ")})`];
  let vnc: VncServers | undefined;
  let server: ChildProcess | undefined;
  /** False once the server in this process listens: its shutdown stops the desktop then. */
  let cleanupOnExit = true;
  /** The panel and VNC, started beside the server. */
  let furniture: Promise<void> = Promise.resolve();
  try {
    await trusted;
    // The panel and VNC start beside the server: its first answer needs neither. A failure of
    // either still takes the container down, once the server has started.
    furniture = (async () => {
      // The panel's menu starts programs: with a command user, it is that user's.
      if (!settings.externalDisplay) {
        await startDesktopApps({ env: desktop.env, user }, log);
        marks.push(`panel ${elapsed()}`);
      } else {
        log(
          `the desktop is ${settings.externalDisplay}'s, started by another program; the server drives it once it appears`,
        );
      }
      if (settings.vnc) {
        // Keys over plain HTTP: the viewer stays on loopback. With TLS it serves over TLS too.
        const tls = settings.tlsFiles && {
          cert: await readFile(settings.tlsFiles.cert),
          key: await readFile(settings.tlsFiles.key),
        };
        vnc = await startVnc(
          settings.vnc,
          desktop.env,
          { host: settings.insecureHttp ? "127.0.0.1" : settings.host, tls },
          { log },
        );
        marks.push(`VNC ${elapsed()}`);
      }
    })();
    furniture.catch(() => undefined);
    for (const file of settings.privateFiles) {
      await mkdir(dirname(file.path), { recursive: true, mode: 0o700 });
      await writeFile(file.path, file.content, { mode: 0o600 });
    }
    const healthFile = healthOriginFile(env);
    await mkdir(dirname(healthFile), { recursive: true });
    await writeFile(healthFile, `${settings.healthOrigin}\n`);
    const { [API_KEYS_ENV]: keys, ...rest } = serverSecrets;
    if (!keys) {
      const stopped = await Promise.race([stopSignal, Promise.resolve(undefined)]);
      if (stopped) return 0;
      // The server in this process: it listens until SIGTERM, when it stops first, then this.
      Object.assign(process.env, env, desktop.env, rest);
      const cleanup = async () => {
        await furniture.catch(() => undefined);
        await vnc?.stop();
        await desktop.stop();
        await removeFiles(env, settings.privateFiles);
      };
      onShutdown(cleanup);
      // A server that cannot start (a port taken) throws: the desktop is stopped below.
      const { buildProgram } = await (cli ?? import("../cli/main.js"));
      await buildProgram().parseAsync([process.execPath, HANGAR_BIN, ...settings.serveArgs]);
      releaseYoungGeneration();
      await furniture;
      if (programLoaded !== undefined) marks.push(`program loaded ${programLoaded}`);
      log(`ready, ms since the process began: ${marks.join(", ")}, server ${elapsed()}`);
      cleanupOnExit = false;
      return undefined;
    }
    await furniture;
    const serverEnv = {
      ...memoryEnv(env),
      ...env,
      ...desktop.env,
      ...rest,
      [API_KEYS_FD_ENV]: "3",
    };
    releaseYoungGeneration();
    server = spawn(process.execPath, [HANGAR_BIN, ...settings.serveArgs], {
      env: serverEnv,
      stdio: ["inherit", "inherit", "inherit", "pipe"],
    });
    const keysPipe = server.stdio[3];
    keysPipe?.on("error", () => undefined);
    if (keysPipe && "end" in keysPipe) keysPipe.end(keys);
    const exited = once(server, "exit").then(([code, signal]) => (code ?? (signal ? 128 : 1)) as number);
    const first = await Promise.race([exited, stopSignal]);
    if (typeof first === "number") return first;
    server.kill("SIGTERM");
    const timer = setTimeout(() => server?.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
    return 0;
  } finally {
    if (cleanupOnExit) {
      await furniture.catch(() => undefined);
      await vnc?.stop();
      await desktop.stop();
      await removeFiles(env, settings.privateFiles);
    }
  }
}

/**
 * A display another program starts and stops (E2B's desktop SDK, through envd): nothing to start
 * or stop here; the server connects to it when a command needs it, and again after it restarts.
 */
function externalDisplay(display: string): {
  env: Record<string, string>;
  audioError?: string;
  stop(): Promise<void>;
} {
  return { env: { DISPLAY: display }, stop: async () => undefined };
}

/** The health check's origin file and the private files written for the server. */
/**
 * Adds the mounted egress CA to the user's NSS database; a failure is said and the desktop goes on.
 * Run as a command is (os/process.ts): a timeout kills its whole process group.
 */
async function trustEgressCa(env: NodeJS.ProcessEnv, user: CommandUser | undefined): Promise<void> {
  const vars = Object.fromEntries(
    Object.entries(user ? userEnv(user, env) : env).filter((e): e is [string, string] => e[1] !== undefined),
  );
  const result = await runShell({ command: TRUST_IN_NSS, env: vars, timeoutSeconds: 30, user }).catch(
    (err: Error) => ({
      returnCode: -1,
      stderr: err.message,
    }),
  );
  if (result.returnCode !== 0) {
    log(
      `the egress CA is not trusted by the desktop's browser: ${result.stderr.trim() || `exit ${result.returnCode}`}`,
    );
  }
}

/**
 * The places a root server and its desktop user share, made safe to share, as volumes mounted for
 * the container may not be (a Kubernetes `emptyDir` is mode 0777 without the sticky bit, a claim
 * root's): the shared temporary directories get the sticky bit (the agent may not remove or rename
 * the server's files there), and the user's home is the user's. Returns the server's own home:
 * root's (/root), or a private directory under the temporary one where the root file system is
 * read-only.
 */
async function prepareForCommandUser(user: CommandUser): Promise<string> {
  for (const dir of new Set([tmpdir(), "/tmp", "/tmp/.X11-unix"])) {
    const info = await stat(dir).catch(() => undefined);
    if (info?.isDirectory() && info.mode & 0o002 && !(info.mode & 0o1000)) {
      await chmod(dir, (info.mode & 0o7777) | 0o1000);
    }
  }
  const home = await stat(user.home).catch(() => undefined);
  if (home?.isDirectory() && home.uid !== user.uid) {
    await chown(user.home, user.uid, user.gid);
    await chmod(user.home, 0o755);
  }
  const rootHome = homeOfRoot();
  if (await writable(rootHome)) return rootHome;
  const own = join(tmpdir(), ".hangar-root");
  await mkdir(own, { recursive: true, mode: 0o700 });
  const made = await lstat(own);
  // Made by root, or taken before: only a directory of root's, private, is used.
  if (!made.isDirectory() || made.uid !== 0) throw new Error(`${own} is not root's own directory`);
  await chmod(own, 0o700);
  return own;
}

async function writable(dir: string): Promise<boolean> {
  try {
    await access(dir, constants.W_OK);
    // A read-only file system says so only when written to.
    const probe = join(dir, `.hangar-write-${process.pid}`);
    await writeFile(probe, "");
    await rm(probe, { force: true });
    return true;
  } catch {
    return false;
  }
}

/** root's home from the user database (/root when it says nothing). */
function homeOfRoot(): string {
  try {
    return userInfo().homedir || "/root";
  } catch {
    return "/root";
  }
}

async function removeFiles(env: NodeJS.ProcessEnv, files: { path: string }[]) {
  await rm(healthOriginFile(env), { force: true });
  for (const file of files) await rm(file.path, { force: true });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  runContainer(process.argv.slice(2)).then(
    (code) => {
      if (code !== undefined) process.exit(code);
    },
    (err: Error) => {
      process.stderr.write(`hangar container: ${err.message}\n`);
      process.exit(2);
    },
  );
}
