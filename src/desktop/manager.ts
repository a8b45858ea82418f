/**
 * The desktop the server uses: connects lazily on the first desktop command, notices when the X
 * server goes away, and connects again on the next command once the display is back. Without a
 * display, desktop commands fail with `unavailable` and a message that says what to do; the rest
 * of the server keeps working.
 *
 * @example
 * const desktop = new DesktopManager({ display: process.env.DISPLAY });
 * await startComputerServer({ desktop: desktop.provider });
 */
import { setTimeout as sleep } from "node:timers/promises";
import { CommandError } from "../common/errors.js";
import { type Logger, silentLogger } from "../common/logger.js";
import { type DesktopBackend, type DesktopProvider, DisplayAbsentError } from "./backend.js";
import { takeScreenshot } from "./screenshot.js";

/** A backend that can tell when it has lost its display. */
export interface ConnectedBackend extends DesktopBackend {
  readonly alive: boolean;
  onClose(listener: (reason: string) => void): void;
}

/**
 * Pauses between connection attempts before a command is answered `unavailable`: an X server that
 * is resetting (its last client just left) drops new connections for a moment, and one whose
 * short-lived clients keep coming and going resets again and again (on a loaded machine each
 * reset takes longer).
 */
const RETRY_DELAYS_MS = [50, 150, 300, 500, 1000];
/** Attempts stop this long after the first: a display that takes so long to answer will not. */
const RETRY_FOR_MS = 3000;

export interface DesktopManagerOptions {
  /** The X display (`:N`); default `$DISPLAY` at the time of each connection attempt. */
  display?: string;
  /** How to connect (default: the X11 backend). */
  connect?: (display: string) => Promise<ConnectedBackend>;
  log?: Logger;
}

export class DesktopManager {
  private backend: ConnectedBackend | null = null;
  private connecting: Promise<ConnectedBackend> | null = null;
  private closed = false;
  private readonly log: Logger;
  private readonly connectTo: (display: string) => Promise<ConnectedBackend>;

  constructor(private readonly options: DesktopManagerOptions = {}) {
    this.log = options.log ?? silentLogger;
    this.connectTo =
      options.connect ?? (async (display) => (await import("./x11/backend.js")).X11Backend.connect(display));
  }

  /** The provider to give the server. */
  readonly provider: DesktopProvider = () => this.get();

  /** The connected backend, connecting first when needed. */
  async get(): Promise<DesktopBackend> {
    if (this.closed) throw new CommandError("unavailable", "The desktop has been shut down");
    if (this.backend?.alive) return this.backend;
    this.backend = null;
    if (!this.connecting) {
      this.connecting = this.connect().finally(() => {
        this.connecting = null;
      });
    }
    return this.connecting;
  }

  /**
   * Connects and takes one PNG screenshot, so that the first command does not pay for loading the
   * backend, the connection, the capture's set-up and the encoder's first strips (about 100–200 ms
   * of one core). A failure is only logged: the next command connects as it always does.
   */
  async warm(): Promise<void> {
    const started = performance.now();
    try {
      await takeScreenshot(await this.get(), { format: "png", quality: 80 });
      this.log.info({ ms: Math.round(performance.now() - started) }, "desktop warmed up");
    } catch (err) {
      this.log.debug({ err: (err as Error).message }, "desktop warm-up failed; the first command connects");
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const backend = this.backend ?? (await this.connecting?.catch(() => null)) ?? null;
    this.backend = null;
    await backend?.close().catch(() => undefined);
  }

  private async connect(): Promise<ConnectedBackend> {
    const display = this.options.display ?? process.env.DISPLAY;
    if (!display) {
      throw new CommandError(
        "unavailable",
        "No display: DISPLAY is not set. Start the server inside a desktop session, or let it start its own " +
          "(hangar serve --virtual-display 1280x800)",
      );
    }
    const backend = await this.connectWithRetries(display);
    if (this.closed) {
      await backend.close();
      throw new CommandError("unavailable", "The desktop has been shut down");
    }
    this.log.info({ display, backend: backend.name }, "desktop connected");
    backend.onClose((reason) => {
      if (this.backend === backend) this.backend = null;
      if (!this.closed)
        this.log.warn({ display, reason }, "desktop lost; will reconnect on the next desktop command");
    });
    this.backend = backend;
    return backend;
  }

  private async connectWithRetries(display: string): Promise<ConnectedBackend> {
    const started = Date.now();
    for (const delay of RETRY_DELAYS_MS) {
      try {
        return await this.connectTo(display);
      } catch (err) {
        // A display that does not answer at all has used its time already.
        if (err instanceof DisplayAbsentError || this.closed || Date.now() - started > RETRY_FOR_MS)
          throw err;
        this.log.debug({ display, err: (err as Error).message }, "desktop connection failed; trying again");
        await sleep(delay);
      }
    }
    return this.connectTo(display);
  }
}
