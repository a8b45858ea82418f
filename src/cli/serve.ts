/** `hangar serve`: the computer server. */
import { setFlagsFromString } from "node:v8";
import { type Command, InvalidArgumentError } from "commander";
import { createLogger } from "../common/logger.js";
import { forgetMemorySettings } from "../common/memory-env.js";
import { parseBytes } from "../common/sizes.js";
import {
  DEFAULT_ENVD_PORT,
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_OSWORLD_PORT,
  startComputerServer,
} from "../computer/server.js";
import { readTokenFile } from "../computer/transports/envd/envd-token.js";
import { BACKEND_NAMES, type BackendName, defaultBackend } from "../desktop/choose-backend.js";
import { type DesktopSession, parseDisplaySize, startDesktopSession } from "../desktop/session.js";
import { resolveCommandUser } from "../os/command-user.js";
import { DEFAULT_WARM_SHELLS } from "../os/warm-shells.js";
import { relaunch } from "./launcher.js";
import { cloudServeOptions } from "./serve-cloud.js";
import {
  browserAccess,
  browserAccessOptions,
  keepServingThroughStrayErrors,
  logLevelOption,
  onShutdown,
  parsePort,
} from "./util.js";

export function registerServe(program: Command) {
  const serve = program
    .command("serve")
    .description("Start the computer server (POST /cmd, /ws, /status) that lets agents drive this desktop")
    .option("--host <address>", "address to listen on (0.0.0.0 for every interface)", "127.0.0.1")
    .option("--port <port>", "port to listen on (default 8000, or 8443 with TLS)", parsePort)
    .addOption(logLevelOption(process.env.HANGAR_LOG_LEVEL ?? "info"))
    .option("--body-limit <size>", "largest request body, e.g. 64MiB", "64MiB")
    .option(
      "--keep-alive-timeout <seconds>",
      "close idle keep-alive connections after this long; keep it above the idle timeout of a load balancer in front (60 s is common)",
      parseSeconds,
      DEFAULT_KEEP_ALIVE_TIMEOUT_MS / 1000,
    )
    .option("--no-spread", "on /cmd, send results in `content` only (no copy of their fields beside it)")
    .option(
      "--warm-shells <count>",
      "shells kept waiting for run_command, so that a command does not fork the server; 0: spawn one per command",
      wholeNumber(0, 64),
      DEFAULT_WARM_SHELLS,
    )
    .option(
      "--virtual-display [WxH]",
      "start a private Xvfb + openbox desktop (default when DISPLAY is unset), e.g. 1920x1080",
      (value: string) => {
        try {
          parseDisplaySize(value);
        } catch (err) {
          throw new InvalidArgumentError((err as Error).message);
        }
        return value;
      },
    )
    .option(
      "--command-user <name>",
      "run every process agents start (run_command, launch, PTYs, OSWorld's /execute, envd) as this unprivileged user, so that they cannot signal or read the server; the server must run as root; no warm shells then",
    )
    .option("--no-virtual-display", "never start a virtual display")
    .option(
      "--warm-up",
      "connect to the desktop and capture it once before the server listens, so that the first " +
        "screenshot costs what later ones do (the container image does; a few MB more at idle)",
    )
    .option("--panel", "on the virtual display, also a panel (lxpanel: task list, clock) and a wallpaper")
    // Cloud mode and TLS (see serve-cloud.ts).
    .option(
      "--container-name <name>",
      "this computer's name, sent by clients in X-Container-Name (default $CONTAINER_NAME)",
    )
    .option(
      "--api-key-file <path>",
      "API keys, one per line or sha256:<hex>; with a container name turns cloud mode on (also $HANGAR_API_KEYS, comma separated)",
    )
    .option(
      "--auth-url <url>",
      "check API keys with a remote verifier (GET <url>/api/vm/auth) instead (also $HANGAR_AUTH_URL)",
    )
    .option("--insecure-http", "accept API keys over plain HTTP (no TLS); logged as a warning")
    .option("--tls-cert <path>", "serve HTTPS and WSS with this PEM certificate (needs --tls-key)")
    .option("--tls-key <path>", "the PEM private key of --tls-cert")
    .option("--ssl-certfile <path>", "same as --tls-cert (cua's spelling)")
    .option("--ssl-keyfile <path>", "same as --tls-key (cua's spelling)")
    .option(
      "--cloud",
      "require cloud mode; without --tls-cert, make (once) a self-signed certificate and print its fingerprint",
    )
    .option(
      "--browser-path <path>",
      "the browser of browser_* and /playwright_exec (default: chromium on PATH; also $HANGAR_BROWSER)",
    )
    .option(
      "--activity-size <count>",
      "commands kept in the activity timeline (GET /activity)",
      wholeNumber(1, 1_000_000),
      500,
    )
    .option("--browser-evaluate", "let agents run JavaScript in pages (browser_evaluate)")
    .option(
      "--trajectory-dir <dir>",
      "write every command any client runs, with the screenshots agents were sent, to a trajectory in this directory (without it: only between start_trajectory and stop_trajectory, in ~/.local/share/hangar/trajectories)",
    )
    .option(
      "--trajectory-max-bytes <size>",
      "disk the trajectory directory may use; the oldest trajectories are deleted past it",
      "1GiB",
    )
    .option(
      "--recordings-dir <dir>",
      "where start_recording puts videos given no path, with their index (default ~/.local/share/hangar/recordings; the encoder is ffmpeg on PATH or $HANGAR_FFMPEG)",
    )
    .option(
      "--osworld [port]",
      "also serve OSWorld's desktop controller API (/execute, /screenshot, /accessibility, …) on this port (default 5000); docs/osworld.md",
      parsePort,
    )
    .option(
      "--envd-port <port>",
      `also serve E2B's envd (the process and filesystem services E2B's SDKs use) on this port, e.g. ${DEFAULT_ENVD_PORT}; docs/e2b.md`,
      parsePort,
    )
    .option(
      "--envd-token-file <path>",
      "envd's access token (first line of the file; needed beyond loopback): clients send it in X-Access-Token",
    )
    .option(
      "--envd-host <address>",
      "the address envd listens on (default --host's), e.g. 127.0.0.1 where a control plane reaches it through GET /tunnel/{port}",
    )
    .option(
      "--backend <name>",
      `desktop backend: ${BACKEND_NAMES.join(" or ")}`,
      parseBackend,
      defaultBackend(),
    );
  browserAccessOptions(serve).action(async (opts) => {
    // bin/hangar.js has relaunched already; this is for a command line run another way with keys.
    if (relaunch(process.argv, process.env, { memory: false })) return;
    forgetMemorySettings();
    growHeapInLargerSteps();
    const log = createLogger({ level: opts.logLevel, name: "computer" });
    keepServingThroughStrayErrors(log);
    const bodyLimitBytes = parseBytes(opts.bodyLimit);
    const cloud = await cloudServeOptions(opts, log);
    const access = browserAccess(opts);
    if ((opts.envdTokenFile || opts.envdHost) && opts.envdPort === undefined)
      throw new Error("--envd-token-file and --envd-host go with --envd-port");
    const envd =
      opts.envdPort === undefined
        ? undefined
        : {
            port: opts.envdPort,
            host: opts.envdHost,
            token: opts.envdTokenFile ? readTokenFile(opts.envdTokenFile) : undefined,
          };
    const commandUser = opts.commandUser === undefined ? undefined : resolveCommandUser(opts.commandUser);
    // Check every option before starting a virtual display that a mistake would leave behind.
    const desktop = await startDesktopSession({
      user: commandUser,
      virtualDisplay: opts.virtualDisplay,
      log,
      backend: opts.backend,
      panel: Boolean(opts.panel),
    });
    // Warm before it listens: a desktop counts as ready when it answers, and its first screenshot
    // then costs what later ones do, with nothing of the start still competing for its CPU.
    if (opts.warmUp) await desktop.manager.warm();
    const server = await startComputerServer({
      ...cloud,
      ...access,
      browser: {
        executablePath: opts.browserPath ?? process.env.HANGAR_BROWSER,
        allowEvaluate: Boolean(opts.browserEvaluate),
        searchUrl: process.env.HANGAR_SEARCH_URL,
      },
      desktop: desktop.manager.provider,
      host: opts.host,
      port: opts.port,
      log,
      spreadResult: opts.spread,
      warmShells: opts.warmShells,
      commandUser,
      bodyLimitBytes,
      collectGarbageWhenIdle: true,
      keepAliveTimeoutMs: opts.keepAliveTimeout * 1000,
      activitySize: opts.activitySize,
      recordings: { dir: opts.recordingsDir },
      osworld:
        opts.osworld === undefined
          ? undefined
          : { port: opts.osworld === true ? DEFAULT_OSWORLD_PORT : opts.osworld },
      envd,
      trajectories: {
        dir: opts.trajectoryDir,
        always: opts.trajectoryDir !== undefined,
        maxBytes: parseBytes(opts.trajectoryMaxBytes),
      },
    }).catch(async (err) => {
      await desktop.stop();
      throw err;
    });
    log.info({ url: server.url }, "computer server listening");
    process.stdout.write(`${listeningLine(server.url, Boolean(cloud.cloud), desktop, opts.backend)}\n`);
    if (server.osworldUrl) process.stdout.write(`OSWorld controller API on ${server.osworldUrl}\n`);
    if (server.envdUrl) process.stdout.write(`E2B envd on ${server.envdUrl}\n`);
    onShutdown(async () => {
      log.info("shutting down");
      await server.close();
      await desktop.stop();
    });
  });
}

function parseSeconds(value: string): number {
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 24 * 3600) {
    throw new InvalidArgumentError("expected a number of seconds, above 0 and at most 86400");
  }
  return seconds;
}

/** A parser of whole numbers from `min` to `max`. */
function wholeNumber(min: number, max: number) {
  return (value: string): number => {
    const count = Number(value);
    if (!Number.isInteger(count) || count < min || count > max) {
      throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}`);
    }
    return count;
  };
}

function parseBackend(value: string): BackendName {
  if (!(BACKEND_NAMES as readonly string[]).includes(value)) {
    throw new InvalidArgumentError(`expected one of ${BACKEND_NAMES.join(", ")}`);
  }
  return value as BackendName;
}

/**
 * Large replies (screenshots, file chunks) allocate megabytes, and with the server's small heap
 * (about 12 MB) V8's default growth starts a marking cycle every few replies. Growing the heap limit
 * by 150 % at each step keeps those cycles rarer; 400 % served transfers no faster (`bench/core.ts`,
 * interleaved runs) but held about 40 MB more after them. What a burst leaves behind is collected a
 * few seconds after the last request (`collectGarbageWhenIdle`).
 */
function growHeapInLargerSteps() {
  setFlagsFromString("--heap-growing-percent=150");
}

/** The one line a person reads when the server is up: where, which mode, which display and backend. */
function listeningLine(url: string, cloud: boolean, desktop: DesktopSession, backend: string): string {
  const virtual = desktop.virtualDisplay;
  const display = virtual
    ? `virtual display ${virtual.display} (${virtual.width}x${virtual.height})`
    : process.env.DISPLAY
      ? `display ${process.env.DISPLAY}`
      : "no display";
  const mode = cloud ? "cloud mode: API key required" : "local mode: no authentication, loopback pages only";
  return `Hangar computer server on ${url} (${mode}; ${display}; ${backend} backend)`;
}
