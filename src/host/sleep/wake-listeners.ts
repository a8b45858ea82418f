/**
 * Wake on the first request, at the desktop's own address. While a desktop sleeps, nothing of it
 * listens where its record says it is (a QEMU VM's loopback address and ports, a stopped
 * container's published ports): the host service listens there instead. A connection is held
 * (what the client sends is kept, up to 1 MiB) while the desktop is woken, then carried to the
 * desktop, which by then listens at the same address; the client sees a slow answer, not an error.
 * The first HTTP response on a carried connection says `X-Hangar-Woke: 1`.
 *
 * The listeners close just before the desktop starts (it binds the same ports), and open again
 * when it goes back to sleep or a wake fails.
 */
import { connect, createServer, type Server, type Socket } from "node:net";
import { Transform } from "node:stream";
import type { WakeAddress } from "../desktops/runtime.js";

/** Bytes a held connection may send before the desktop is awake; then it is no longer read. */
const HELD_BYTES = 1024 * 1024;
export const WOKE_HEADER = "X-Hangar-Woke";

export interface WakeListenerEvents {
  /** Wakes the desktop; resolves once it can be reached at its addresses again (rejects when not). */
  wake(name: string, why: string): Promise<void>;
  /** Tells of a listener that could not be opened, or a held connection that could not be carried. */
  problem(name: string, message: string): void;
}

interface Desktop {
  servers: Server[];
  held: Set<Socket>;
}

export class WakeListeners {
  private readonly desktops = new Map<string, Desktop>();

  constructor(private readonly events: WakeListenerEvents) {}

  /** Listens at the sleeping desktop's addresses (again, after a failed wake: the old ones stay). */
  async hold(name: string, addresses: WakeAddress[]) {
    const desktop = this.desktops.get(name) ?? { servers: [], held: new Set<Socket>() };
    this.desktops.set(name, desktop);
    await this.closeServers(desktop);
    for (const address of addresses) {
      const server = createServer((socket) => this.held(name, desktop, address, socket));
      try {
        await new Promise<void>((resolve, reject) => {
          server.once("error", reject);
          server.listen({ host: address.host, port: address.port, exclusive: true }, () => {
            server.off("error", reject);
            resolve();
          });
        });
        desktop.servers.push(server);
      } catch (err) {
        this.events.problem(
          name,
          `cannot listen at ${address.host}:${address.port} to wake it on a request (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
        );
      }
    }
  }

  /** Stops listening (the desktop is about to bind its ports); held connections wait on. */
  async release(name: string) {
    const desktop = this.desktops.get(name);
    if (desktop) await this.closeServers(desktop);
  }

  /** Forgets the desktop: stops listening and drops what is held (it was stopped or deleted). */
  async drop(name: string) {
    const desktop = this.desktops.get(name);
    if (!desktop) return;
    this.desktops.delete(name);
    await this.closeServers(desktop);
    for (const socket of desktop.held) socket.destroy();
  }

  /** Whether the service listens for the desktop now. */
  listening(name: string): boolean {
    return (this.desktops.get(name)?.servers.length ?? 0) > 0;
  }

  async close() {
    await Promise.all([...this.desktops.keys()].map((name) => this.drop(name)));
  }

  private async closeServers(desktop: Desktop) {
    const servers = desktop.servers.splice(0);
    for (const server of servers) server.close();
    // The listening sockets are closed when the loop turns: then the desktop can bind the ports.
    if (servers.length > 0) await new Promise((resolve) => setImmediate(resolve));
  }

  private held(name: string, desktop: Desktop, address: WakeAddress, socket: Socket) {
    desktop.held.add(socket);
    const chunks: Buffer[] = [];
    let bytes = 0;
    const keep = (chunk: Buffer) => {
      chunks.push(chunk);
      bytes += chunk.length;
      if (bytes >= HELD_BYTES) socket.pause();
    };
    socket.on("data", keep);
    socket.on("error", () => socket.destroy());
    socket.once("close", () => desktop.held.delete(socket));
    this.events.wake(name, `a connection to ${address.host}:${address.port}`).then(
      () => {
        if (socket.destroyed) return;
        const upstream = connect({ host: address.host, port: address.port });
        upstream.once("connect", () => {
          desktop.held.delete(socket);
          socket.off("data", keep);
          for (const chunk of chunks) upstream.write(chunk);
          socket.pipe(upstream);
          upstream.pipe(markFirstResponse()).pipe(socket);
          socket.resume();
        });
        upstream.on("error", (err) => {
          this.events.problem(name, `a woken connection could not be carried: ${err.message}`);
          socket.destroy();
        });
        // Each side's end is passed on by the pipes; a client gone for good takes the other side.
        socket.once("close", () => upstream.destroy());
      },
      (err: Error) => {
        this.events.problem(name, `a held connection was closed: the desktop did not wake (${err.message})`);
        socket.destroy();
      },
    );
  }
}

/** Adds the woke header to the first response when it is HTTP/1.x; passes anything else as it is. */
function markFirstResponse(): Transform {
  let head: Buffer | undefined = Buffer.alloc(0);
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (!head) return done(null, chunk);
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n");
      if (end < 0 && head.length < 1024) return done();
      const all = head;
      head = undefined;
      if (end < 0 || !all.subarray(0, 7).equals(Buffer.from("HTTP/1."))) return done(null, all);
      done(
        null,
        Buffer.concat([
          all.subarray(0, end + 2),
          Buffer.from(`${WOKE_HEADER}: 1\r\n`),
          all.subarray(end + 2),
        ]),
      );
    },
    flush(done) {
      done(null, head && head.length > 0 ? head : undefined);
    },
  });
}
