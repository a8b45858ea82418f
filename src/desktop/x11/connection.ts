/**
 * One persistent connection to an X server through the pure-JavaScript `x11` package, with its
 * callback requests turned into promises that fail (instead of hanging) once the server is gone.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { createConnection } from "node:net";
import type { Duplex } from "node:stream";
import { CommandError } from "../../common/errors.js";
import { DisplayAbsentError } from "../backend.js";

const require = createRequire(import.meta.url);
// biome-ignore lint/suspicious/noExplicitAny: the x11 package ships no types; XClient is typed at its use
const x11: any = require("x11");
/** The x11 package's unix-socket transport that can pass file descriptors (for MIT-SHM). */
const fdpass: { connect(path: string, options: object): Duplex | null } = require("x11/lib/fdpass.js");

/** A socket this long without closing after `end()` is destroyed (a stopped X server never answers). */
const CLOSE_GRACE_MS = 1000;

// biome-ignore lint/suspicious/noExplicitAny: the raw request interface of the x11 package
export type XClient = any;
// biome-ignore lint/suspicious/noExplicitAny: an extension object of the x11 package
export type XExtension = any;

export interface XScreen {
  root: number;
  pixel_width: number;
  pixel_height: number;
  root_depth: number;
}

export interface XDisplayInfo {
  client: XClient;
  screen: XScreen[];
  min_keycode: number;
  max_keycode: number;
  image_byte_order: number;
  isLocalSocket: boolean;
}

type Callback<T> = (err: Error | null, value: T) => unknown;

export class XConnection {
  /** Why the connection ended, once it has. */
  private closedReason: string | null = null;
  private readonly pending = new Set<(err: Error) => void>();
  private readonly closeListeners: ((reason: string) => void)[] = [];
  private readonly atoms = new Map<string, number>();

  private constructor(
    readonly display: string,
    readonly info: XDisplayInfo,
  ) {
    const X = info.client;
    ownAtomCache(X);
    X.on("end", () => this.markClosed(`the X server of display ${display} closed the connection`));
    X.on("error", (err: Error & { seq?: number }) => {
      // Errors of requests that carry a callback reach the callback; what arrives here is either a
      // failure of a fire-and-forget request (harmless to the connection) or a socket error.
      if (err.seq === undefined) this.markClosed(`lost the X display ${display}: ${err.message}`);
    });
    X.stream?.on?.("close", () => this.markClosed(`the X server of display ${display} went away`));
  }

  /**
   * Connects to `display` (`:N`); fails with `unavailable` and the reason when it cannot, and then
   * closes the socket it opened. Nothing listening there is a `DisplayAbsentError`.
   */
  static open(display: string, options: { shm?: object; timeoutMs?: number } = {}): Promise<XConnection> {
    const timeoutMs = options.timeoutMs ?? 5000;
    return new Promise((resolve, reject) => {
      let settled = false;
      let stream: Duplex | undefined;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        stream?.destroy();
        const message = `Cannot connect to X display ${display}: ${describe(err)}`;
        reject(
          nothingListening(err) ? new DisplayAbsentError(message) : new CommandError("unavailable", message),
        );
      };
      const timer = setTimeout(() => fail(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      try {
        const local = localDisplay(display);
        // The socket is made here, not by the x11 package, so that a failed connect can be closed.
        stream = local?.socket ? openUnixSocket(local.socket) : undefined;
        stream?.on("error", fail);
        // Requests are gathered into one socket write until one that waits for a reply (or until the
        // event loop is about to wait): a click's motion, press, release and sync go out together.
        const common = { shm: options.shm, bufferRequests: true };
        const client = x11.createClient(
          stream
            ? { display, stream, auth: undefined, ...common }
            : { display: local ? `tcp/localhost:${local.number}` : display, ...common },
          (err: Error | null, info: XDisplayInfo) => {
            if (err) return fail(err);
            if (settled) return client.terminate?.();
            settled = true;
            clearTimeout(timer);
            stream?.off("error", fail);
            resolve(new XConnection(display, info));
          },
        );
        client.on("error", fail);
      } catch (err) {
        fail(err as Error);
      }
    });
  }

  get X(): XClient {
    return this.info.client;
  }

  get screen(): XScreen {
    return this.info.screen[0];
  }

  get root(): number {
    return this.screen.root;
  }

  get alive(): boolean {
    return this.closedReason === null;
  }

  /** Called once when the connection ends (the X server died or closed it). */
  onClose(listener: (reason: string) => void) {
    if (this.closedReason !== null) listener(this.closedReason);
    else this.closeListeners.push(listener);
  }

  /**
   * Runs one request that answers through a callback; rejects with `unavailable` when the
   * connection ends before the answer, instead of waiting forever.
   */
  call<T>(request: (cb: Callback<T>) => unknown): Promise<T> {
    if (this.closedReason !== null) return Promise.reject(this.unavailable());
    return new Promise<T>((resolve, reject) => {
      const abort = (err: Error) => reject(err);
      this.pending.add(abort);
      try {
        request((err, value) => {
          this.pending.delete(abort);
          if (err) reject(err);
          else resolve(value);
          return true;
        });
      } catch (err) {
        this.pending.delete(abort);
        reject(err);
      }
    });
  }

  /** Fails with `unavailable` when the connection is gone; use before fire-and-forget requests. */
  ensureAlive() {
    if (this.closedReason !== null) throw this.unavailable();
  }

  /** A round trip: every request sent so far has been processed by the server. */
  sync(): Promise<void> {
    return this.call<void>((cb) => this.X.sync(() => cb(null, undefined)));
  }

  /** Loads an extension (`shm`, `xtest`, `damage`). */
  extension(name: string): Promise<XExtension> {
    return this.call((cb) => this.X.require(name, cb));
  }

  /** The atom of a name, cached. */
  async atom(name: string): Promise<number> {
    const known = this.atoms.get(name);
    if (known !== undefined) return known;
    const atom = await this.call<number>((cb) => this.X.InternAtom(false, name, cb));
    this.atoms.set(name, atom);
    return atom;
  }

  close() {
    if (this.closedReason === null) {
      try {
        this.X.terminate();
      } catch {
        // already gone
      }
      this.markClosed("the connection was closed");
    }
  }

  private unavailable(): CommandError {
    return new CommandError("unavailable", `The desktop is unavailable: ${this.closedReason}`);
  }

  private markClosed(reason: string) {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    const stream: Duplex | undefined = this.X.stream;
    if (stream && !stream.destroyed) setTimeout(() => stream.destroy(), CLOSE_GRACE_MS).unref();
    const err = this.unavailable();
    for (const abort of this.pending) abort(err);
    this.pending.clear();
    for (const listener of this.closeListeners.splice(0)) listener(reason);
  }
}

function nothingListening(err: Error): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  // The fd-passing socket reports a refused connect as libuv's status (111 is ECONNREFUSED).
  return code === "ENOENT" || code === "ECONNREFUSED" || code === "UV_111";
}

function describe(err: Error): string {
  return nothingListening(err) ? "no X server is listening there" : err.message;
}

/** `:N` (or `:N.S`, `unix:N`): the display's number and its unix socket when that exists. */
function localDisplay(display: string): { number: string; socket?: string } | undefined {
  const number = /^(?:unix)?:(\d+)(?:\.\d+)?$/.exec(display)?.[1];
  if (number === undefined) return undefined;
  const socket = `/tmp/.X11-unix/X${number}`;
  return { number, socket: existsSync(socket) ? socket : undefined };
}

/** A connecting socket to an X server's unix socket, able to pass descriptors where Node allows it. */
function openUnixSocket(path: string): Duplex {
  const socket = fdpass.connect(path, {}) as (Duplex & { connecting: boolean }) | null;
  if (!socket) return createConnection(path);
  // It reports its connect through 'connect' only; the x11 package waits for that when it sees `connecting`.
  socket.connecting = true;
  socket.once("connect", () => {
    socket.connecting = false;
  });
  return socket;
}

/** The last atom the X protocol predefines (`WM_TRANSIENT_FOR`): 1 to 68 mean the same on every server. */
const LAST_PREDEFINED_ATOM = 68;

/**
 * The x11 package caches interned atoms in one object shared by every connection of the process, so
 * a second display, or the same display after its X server restarted, would be asked with the atoms
 * of the first (another server's numbers for `_NET_WM_PID` name some other property there). Each
 * connection gets a cache of its own, holding only the predefined atoms.
 */
function ownAtomCache(client: XClient) {
  const shared: Record<string, number> = client.atoms;
  client.atoms = Object.fromEntries(
    Object.entries(shared).filter(([, atom]) => atom <= LAST_PREDEFINED_ATOM),
  );
}
