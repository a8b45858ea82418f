/**
 * A private X desktop: Xvfb on a free display number (Xvfb picks it, via -displayfd), an EWMH
 * window manager (openbox, configured by openbox-config.ts: one desktop), and optionally a session
 * D-Bus with the AT-SPI accessibility bus and a PulseAudio server for its sound (audio.ts).
 * `hangar serve` starts one when there is no display; every desktop test starts its own. They end
 * with the process that started them, however it ends.
 *
 * With a command user (`--command-user`), the user's programs reach all of it: the X server takes
 * every local client (no cookie), the session bus admits that user beside this process's (and
 * starts no services, which would run as this process's user), the
 * AT-SPI bus runs as that user (its configuration admits root too), and the sound's socket
 * directory may be passed through (audio.ts).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { asUser, type CommandUser, userCwd, userEnv } from "../os/command-user.js";
import { makeOwnedTempDir } from "../os/owned-temp-dir.js";
import { withParentDeathSignal } from "../os/parent-death.js";
import { type DesktopAudio, startDesktopAudio } from "./audio.js";
import { writeOpenboxConfig } from "./openbox-config.js";
import { XConnection } from "./x11/connection.js";

export interface VirtualDisplayOptions {
  width?: number;
  height?: number;
  /** Start openbox (default true): windows, activation and the active window need it. */
  windowManager?: boolean;
  /** Start a session bus and the AT-SPI bus launcher (default false). */
  accessibility?: boolean;
  /**
   * Start a PulseAudio server with a null sink for the desktop's sound (audio.ts; default false).
   * A display whose sound could not start still starts: `audioError` says why.
   */
  audio?: boolean;
  /** Told as each part is up (`Xvfb`, `bus`, `window manager`, `sound`): the container logs when. */
  onPart?: (part: string) => void;
  /** The user the agent's programs run as (`--command-user`), who must reach the bus and the sound too. */
  user?: CommandUser;
}

export interface VirtualDisplay {
  /** `:N` */
  readonly display: string;
  readonly width: number;
  readonly height: number;
  /** Variables a program needs to use this desktop (`DISPLAY`, and the session bus when started). */
  readonly env: Record<string, string>;
  /** The Xvfb process, e.g. to kill it in a test of what happens when the display dies. */
  readonly xvfb: ChildProcess;
  /** Why the sound asked for did not start, if it did not. */
  readonly audioError?: string;
  stop(): Promise<void>;
}

const AT_SPI_LAUNCHER = "/usr/libexec/at-spi-bus-launcher";

/**
 * The desktop's programs end with the process that started them, a killed one too: SIGTERM, which
 * each handles by cleaning up (Xvfb removes its lock file and socket).
 */
const dieWithUs = (file: string, args: string[]) => withParentDeathSignal(file, args, "TERM");

export async function startVirtualDisplay(options: VirtualDisplayOptions = {}): Promise<VirtualDisplay> {
  const width = options.width ?? 1280;
  const height = options.height ?? 800;
  const children: ChildProcess[] = [];
  let removeConfig: (() => Promise<void>) | undefined;
  let audio: DesktopAudio | undefined;
  /** The sound's start, beside the window manager's (each takes a few hundred ms of a start). */
  let audioStart: Promise<void> | undefined;
  let bus: AccessibilityBus | undefined;
  const stop = async () => {
    await audioStart;
    await audio?.stop();
    for (const child of children.reverse()) await terminate(child);
    await bus?.stop();
    await removeConfig?.();
  };

  try {
    const xvfb = spawn(
      ...dieWithUs("Xvfb", [
        "-displayfd",
        "3",
        "-screen",
        "0",
        `${width}x${height}x24`,
        "-nolisten",
        "tcp",
        "-noreset",
        "+extension",
        "XTEST",
      ]),
      { stdio: ["ignore", "ignore", "pipe", "pipe"] },
    );
    children.push(xvfb);
    const display = `:${await readDisplayNumber(xvfb)}`;
    const env: Record<string, string> = { DISPLAY: display };
    const onPart = options.onPart ?? (() => undefined);
    onPart("Xvfb");

    if (options.accessibility) {
      bus = await startAccessibilityBus(env, options.user);
      Object.assign(env, bus.env);
      onPart("bus");
    }

    let audioError: string | undefined;
    if (options.audio) {
      audioStart = startDesktopAudio(options.user).then(
        (started) => {
          audio = started;
          onPart("sound");
        },
        (err: Error) => {
          audioError = err.message;
        },
      );
    }

    if (options.windowManager ?? true) {
      // Hangar's own configuration: one desktop, no wheel or key bindings that switch desktops.
      const config = await writeOpenboxConfig(options.user);
      removeConfig = config.remove;
      // Its menu starts programs: with a command user, the window manager is that user's too.
      const { user } = options;
      const wm = spawn(
        ...asUser(user, ...dieWithUs("openbox", ["--sm-disable", "--config-file", config.file])),
        {
          stdio: "ignore",
          env: { ...(user ? userEnv(user, process.env) : process.env), ...env },
          cwd: user ? userCwd(user, undefined) : undefined,
        },
      );
      children.push(wm);
      // A window manager that cannot start (not installed, its user's switch refused) says so at once.
      let wmFailed: string | undefined;
      wm.once("error", (err) => {
        wmFailed = `could not be started: ${err.message}`;
      });
      wm.once("exit", (code, signal) => {
        wmFailed ??= `exited (${signal ?? `code ${code}`})`;
      });
      await waitForWindowManager(display, () => wmFailed);
      onPart("window manager");
    }
    await audioStart;
    if (audio) Object.assign(env, audio.env);
    return { display, width, height, env, xvfb, stop, ...(audioError ? { audioError } : {}) };
  } catch (err) {
    await stop();
    throw err;
  }
}

export interface AccessibilityBus {
  /** `DBUS_SESSION_BUS_ADDRESS` and the variables that make toolkits speak AT-SPI. */
  readonly env: Record<string, string>;
  readonly children: ChildProcess[];
  stop(): Promise<void>;
}

/**
 * A session D-Bus and the AT-SPI bus launcher for the desktop described by `env` (its `DISPLAY`):
 * applications started with the returned variables appear in the accessibility tree.
 */
export async function startAccessibilityBus(
  env: Record<string, string>,
  user?: CommandUser,
): Promise<AccessibilityBus> {
  const children: ChildProcess[] = [];
  let configDir: string | undefined;
  const stop = async () => {
    for (const child of [...children].reverse()) await terminate(child);
    if (configDir) await rm(configDir, { recursive: true, force: true });
  };
  try {
    let config = ["--session"];
    if (user) {
      configDir = await makeOwnedTempDir("hangar-bus-");
      const file = join(configDir, "session.conf");
      await writeFile(file, sessionBusConfig(user));
      config = [`--config-file=${file}`];
    }
    const bus = spawn(...dieWithUs("dbus-daemon", [...config, "--nofork", "--print-address=1"]), {
      stdio: ["ignore", "pipe", "ignore"],
    });
    children.push(bus);
    const busEnv: Record<string, string> = {
      DBUS_SESSION_BUS_ADDRESS: (await firstLine(bus, "dbus-daemon")).trim(),
      NO_AT_BRIDGE: "",
      GTK_A11Y: "atspi",
    };
    if (existsSync(AT_SPI_LAUNCHER)) {
      // As the command user, whose applications register on it: its configuration admits root as well.
      const launcher = spawn(...asUser(user, ...dieWithUs(AT_SPI_LAUNCHER, ["--launch-immediately"])), {
        stdio: "ignore",
        env: { ...(user ? userEnv(user, process.env) : process.env), ...env, ...busEnv },
      });
      launcher.on("error", () => undefined);
      children.push(launcher);
    }
    return { env: busEnv, children, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * The session bus's configuration with a command user: the system's session bus (its listening
 * socket, authentication and policy) with the command user admitted beside this process's user,
 * and no services to start. The bus runs as this process's user (the agent cannot end it), so a
 * service it started for a program's request (dconf's, to keep an app's settings) would run with
 * this process's rights: none is known to it. What the desktop needs on it is started here (the
 * AT-SPI bus's launcher, as the user).
 */
function sessionBusConfig(user: CommandUser): string {
  return `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
    <allow user="${user.uid}"/>
  </policy>
</busconfig>
`;
}

async function readDisplayNumber(xvfb: ChildProcess): Promise<number> {
  const line = await firstLine(xvfb, "Xvfb", 3);
  const n = Number.parseInt(line, 10);
  if (!Number.isInteger(n)) throw new Error(`Xvfb printed no display number: ${line}`);
  return n;
}

/** The first line a child writes on the given stdio fd, or an error saying why there is none. */
function firstLine(child: ChildProcess, name: string, fd = 1, timeoutMs = 10_000): Promise<string> {
  const stream = child.stdio[fd] as NodeJS.ReadableStream | null;
  const errors: string[] = [];
  (child.stderr as NodeJS.ReadableStream | null)?.on("data", (d) => errors.push(String(d)));
  return new Promise((resolve, reject) => {
    let text = "";
    const timer = setTimeout(
      () => reject(new Error(`${name} did not start within ${timeoutMs} ms`)),
      timeoutMs,
    );
    stream?.on("data", (chunk) => {
      text += String(chunk);
      if (text.includes("\n")) {
        clearTimeout(timer);
        resolve(text.split("\n")[0]);
      }
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`${name} could not be started: ${err.message} (is it installed?)`));
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with code ${code}: ${errors.join("").trim().slice(-500)}`));
    });
  });
}

/** X's PropertyChangeMask: PropertyNotify events for the window's properties. */
const PROPERTY_CHANGE = 0x00400000;
/** How often the wait looks whether the window manager failed, between property changes. */
const WM_FAILURE_CHECK_MS = 100;

/**
 * openbox is ready when it has set `_NET_SUPPORTING_WM_CHECK` on the root window: told by the X
 * server (PropertyNotify on the root), where `xprop` run every 25 ms cost a fork of this process
 * each time, on the start's busiest moment.
 */
async function waitForWindowManager(display: string, failed: () => string | undefined, timeoutMs = 10_000) {
  const conn = await XConnection.open(display);
  let wake: () => void = () => undefined;
  const onEvent = (event: { name?: string }) => {
    if (event.name === "PropertyNotify") wake();
  };
  try {
    const atom = await conn.atom("_NET_SUPPORTING_WM_CHECK");
    conn.X.on("event", onEvent);
    conn.X.ChangeWindowAttributes(conn.root, { eventMask: PROPERTY_CHANGE });
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const why = failed();
      if (why) throw new Error(`the window manager (openbox) ${why}`);
      const property = await conn.call<{ type: number; data: Buffer }>((cb) =>
        conn.X.GetProperty(0, conn.root, atom, 0, 0, 1, cb),
      );
      if (property.type !== 0 && property.data.length >= 4) return;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error("the window manager (openbox) did not start");
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, WM_FAILURE_CHECK_MS));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  } finally {
    conn.X.removeListener("event", onEvent);
    conn.close();
  }
}

async function terminate(child: ChildProcess) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 2000);
  await exited.catch(() => undefined);
  clearTimeout(timer);
}
