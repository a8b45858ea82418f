/**
 * How a client outside the cluster reaches a desktop: the host service listens on a loopback port
 * per desktop port and carries each connection through the API server to the Pod
 * (`kubectl port-forward`'s way: a WebSocket to `pods/<name>/portforward`, authorised by the
 * host service's own credentials). The record's `computerServerUrl` names that loopback port.
 * Nothing but the API server is contacted; the listener is opened when the Pod runs and closed
 * when it goes.
 */
import { createServer, type Server, type Socket } from "node:net";
import { Writable } from "node:stream";
import { type KubeConfig, PortForward } from "@kubernetes/client-node";

export class PodRelay {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private port = 0;
  /**
   * Awaited before each connection is carried: wakes the desktop when it sleeps (its Pod gone),
   * so that the relay, kept open meanwhile, answers once a new Pod is ready.
   */
  beforeCarry?: () => Promise<void>;

  constructor(
    private readonly forward: PortForward,
    private readonly namespace: string,
    private readonly pod: string,
    private readonly target: number,
  ) {
    this.server = createServer((socket) => this.carry(socket));
  }

  static forwarder(config: KubeConfig): PortForward {
    return new PortForward(config, true);
  }

  /** Listens on 127.0.0.1 (a port of the system's choosing); resolves to the port. */
  async open(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(0, "127.0.0.1", () => {
        this.server.off("error", reject);
        resolve();
      });
    });
    const address = this.server.address();
    this.port = typeof address === "object" && address ? address.port : 0;
    return this.port;
  }

  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  close() {
    this.server.close();
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  private carry(socket: Socket) {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    // The Pod's side said the port refused or failed: the client's connection ends.
    const failure = new Writable({
      write(chunk: Buffer, _encoding, done) {
        // Each channel starts with an empty frame (its port number): only words are a failure.
        if (chunk.length > 0) socket.destroy();
        done();
      },
    });
    (this.beforeCarry?.() ?? Promise.resolve())
      .then(() => {
        if (socket.destroyed) throw new Error("the client went away");
        return this.forward.portForward(this.namespace, this.pod, [this.target], socket, failure, socket);
      })
      .then((ws) => {
        const webSocket = ws as unknown as {
          on(event: string, listener: () => void): void;
          close(): void;
          readyState: number;
        };
        if (socket.destroyed) {
          webSocket.close();
          return;
        }
        webSocket.on("close", () => socket.end());
        webSocket.on("error", () => socket.destroy());
        socket.once("close", () => webSocket.close());
      })
      .catch(() => socket.destroy());
  }
}
