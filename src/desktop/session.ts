/**
 * The desktop of `hangar serve`: the existing display, or (`--virtual-display WxH`, the default on
 * Linux when `DISPLAY` is unset) a private Xvfb + openbox started here and stopped on exit.
 */
import type { Logger } from "../common/logger.js";
import type { CommandUser } from "../os/command-user.js";
import { type BackendName, backendOptions, defaultBackend } from "./choose-backend.js";
import { startDesktopApps } from "./furniture.js";
import { DesktopManager } from "./manager.js";
import {
  type AccessibilityBus,
  startAccessibilityBus,
  startVirtualDisplay,
  type VirtualDisplay,
} from "./virtual-display.js";

export interface DesktopSessionOptions {
  /** `"WxH"` or `true` (default size) to start one, `false` never, `undefined` only without DISPLAY. */
  virtualDisplay?: string | boolean;
  log: Logger;
  /** `x11` or `nut`; default x11 on Linux, nut on macOS and Windows. */
  backend?: BackendName;
  /** On a virtual display it starts: a panel (task list, clock) and a wallpaper too (furniture.ts). */
  panel?: boolean;
  /** The user the agent's programs run as (`--command-user`): the bus and the sound admit it. */
  user?: CommandUser;
}

export interface DesktopSession {
  readonly manager: DesktopManager;
  readonly virtualDisplay: VirtualDisplay | null;
  stop(): Promise<void>;
}

const DEFAULT_SIZE = { width: 1280, height: 800 };

/** `"1920x1080"` → `{width, height}`; throws a message naming the value when it is not one. */
export function parseDisplaySize(text: string): { width: number; height: number } {
  const match = /^(\d{2,5})x(\d{2,5})$/i.exec(text.trim());
  const width = Number(match?.[1]);
  const height = Number(match?.[2]);
  if (!match || width < 64 || height < 64 || width > 16384 || height > 16384) {
    throw new Error(`Invalid display size: ${text} (expected WIDTHxHEIGHT, e.g. 1280x800)`);
  }
  return { width, height };
}

export async function startDesktopSession(options: DesktopSessionOptions): Promise<DesktopSession> {
  const { log } = options;
  const wanted =
    options.virtualDisplay === false
      ? false
      : options.virtualDisplay !== undefined || (process.platform === "linux" && !process.env.DISPLAY);
  const size =
    typeof options.virtualDisplay === "string" ? parseDisplaySize(options.virtualDisplay) : DEFAULT_SIZE;

  let virtualDisplay: VirtualDisplay | null = null;
  if (wanted) {
    const { user } = options;
    virtualDisplay = await startVirtualDisplay({ ...size, accessibility: true, audio: true, user }).catch(
      (err: Error) => {
        log.warn({ err: err.message }, "virtual display with accessibility bus failed; trying without");
        return startVirtualDisplay({ ...size, audio: true, user }).catch((second: Error) => {
          log.error(
            { err: second.message },
            "could not start a virtual display; desktop commands will be unavailable",
          );
          return null;
        });
      },
    );
    if (virtualDisplay) {
      // Programs started by commands (launch, run_command) use this desktop too.
      Object.assign(process.env, virtualDisplay.env);
      // If the server exits without stop() (an error on the way out), do not leave the X server behind.
      const xvfb = virtualDisplay.xvfb;
      process.once("exit", () => {
        if (xvfb.exitCode === null && xvfb.signalCode === null) xvfb.kill("SIGTERM");
      });
      log.info({ display: virtualDisplay.display, ...size }, "virtual display started");
      if (virtualDisplay.audioError) {
        log.warn(
          { err: virtualDisplay.audioError },
          "the desktop has no sound (recordings and the live stream are silent)",
        );
      }
      if (options.panel) {
        await startDesktopApps({ env: virtualDisplay.env, user }, (message) => log.warn(message));
      }
    }
  }

  if (options.panel && !virtualDisplay) {
    log.warn("--panel applies to a virtual display only: this desktop is left as it is");
  }

  // A desktop of its own without a session bus (a plain Xvfb, a bare X session): start one, so that
  // the applications agents launch through Hangar are in the accessibility tree.
  let bus: AccessibilityBus | null = null;
  if (process.platform === "linux" && process.env.DISPLAY && !process.env.DBUS_SESSION_BUS_ADDRESS) {
    bus = await startAccessibilityBus({ DISPLAY: process.env.DISPLAY }, options.user).catch((err: Error) => {
      log.warn(
        { err: err.message },
        "could not start a session bus; the accessibility tree lists X11 windows only",
      );
      return null;
    });
    if (bus) {
      Object.assign(process.env, bus.env);
      const children = bus.children;
      process.once("exit", () => {
        for (const child of children) if (child.exitCode === null) child.kill("SIGTERM");
      });
      log.info({ address: bus.env.DBUS_SESSION_BUS_ADDRESS }, "session bus with AT-SPI started");
    }
  }

  const manager = new DesktopManager({ log, ...backendOptions(options.backend ?? defaultBackend(), log) });
  return {
    manager,
    virtualDisplay,
    async stop() {
      await manager.close();
      await bus?.stop();
      await virtualDisplay?.stop();
    },
  };
}
