/**
 * The host's way into any port of a desktop: a WebSocket to its computer server's
 * `GET /tunnel/{port}` (src/computer/transports/tunnel/tunnel.ts) made into a stream, and an HTTP
 * agent whose connections are such streams, so that Node's HTTP client (and the proxy built on
 * it) speaks to a service inside the desktop as if it were local. The computer server is reached
 * where the desktop's record says (a container's published port, a Pod's relay, a VM's forwarded
 * port), with the desktop's key when it has one.
 */
import { Agent, type ClientRequestArgs } from "node:http";
import type { Duplex } from "node:stream";
import WebSocket, { createWebSocketStream } from "ws";

/** Where a desktop's computer server answers, and its key (cloud mode), from its record. */
export interface DesktopAddress {
  name: string;
  computerServerUrl: string;
  apiKey?: string;
}

/** A port that cannot be reached: `status` is the computer server's answer, when it gave one. */
export class TunnelError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = "TunnelError";
  }
}

/** What the computer server's refusals of a tunnel mean (the Node adapter sends them without a body). */
const REFUSALS: Record<number, string> = {
  502: "nothing listens on port {port} in the desktop",
  404: "the desktop's computer server has no /tunnel (its image predates it)",
  401: "the desktop's computer server refused the host's key",
  403: "the desktop's computer server refused the host (origin or host name)",
  400: "the desktop's computer server refused the tunnel to port {port}",
};

/** How long the computer server may take to accept the tunnel. */
const HANDSHAKE_MS = 10_000;

/** A stream to `port` inside the desktop; a `TunnelError` that says why when there is none. */
export function dialPort(address: DesktopAddress, port: number): Promise<Duplex> {
  const url = new URL(`/tunnel/${port}`, address.computerServerUrl);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, {
      headers: address.apiKey ? { "x-api-key": address.apiKey, "x-container-name": address.name } : {},
      perMessageDeflate: false,
      handshakeTimeout: HANDSHAKE_MS,
    });
    ws.once("open", () => {
      ws.removeAllListeners("error");
      const stream = socketLike(createWebSocketStream(ws));
      // The far end closed: as a TCP socket that does not stay half-open, the stream ends once its
      // data is read, then closes, so that an HTTP agent keeping it idle lets it go instead of
      // handing it to the next request.
      ws.once("close", () => {
        stream.once("end", () => stream.destroy());
        if (stream.listenerCount("data") === 0) stream.resume();
      });
      resolve(stream);
    });
    ws.once("unexpected-response", (_request, response) => {
      let body = "";
      response.setEncoding("utf8");
      response.on("data", (chunk: string) => {
        body = (body + chunk).slice(0, 2000);
      });
      response.once("end", () => {
        let detail = body;
        try {
          detail = (JSON.parse(body) as { detail?: string }).detail ?? body;
        } catch {
          // not JSON: the text itself
        }
        const status = response.statusCode ?? 0;
        reject(
          new TunnelError(
            detail || (REFUSALS[status] ?? `HTTP ${status}`).replace("{port}", String(port)),
            status,
          ),
        );
        ws.terminate();
      });
    });
    ws.once("error", (err) => {
      reject(new TunnelError(`The desktop's computer server cannot be reached: ${err.message}`));
    });
  });
}

/**
 * The stream with the socket methods Node's HTTP client, its agent and the proxy call on a
 * connection (keep-alive, no-delay, timeouts, ref): a tunnel has none of these to set, its
 * WebSocket keeps itself alive, so they do nothing.
 */
function socketLike(stream: Duplex): Duplex {
  const self = () => stream;
  return Object.assign(stream, {
    setKeepAlive: self,
    setNoDelay: self,
    setTimeout: self,
    ref: self,
    unref: self,
  });
}

/**
 * An HTTP agent whose every connection is a tunnel to one port of one desktop; idle connections
 * are kept for the next request unless `keepAlive` is false. `address` is asked at each new
 * connection (a restarted desktop may answer elsewhere).
 */
export class TunnelAgent extends Agent {
  constructor(
    private readonly address: () => Promise<DesktopAddress>,
    readonly port: number,
    keepAlive = true,
  ) {
    super({ keepAlive, maxFreeSockets: 16 });
  }

  override createConnection(
    _options: ClientRequestArgs,
    done?: (err: Error | null, stream: Duplex) => void,
  ): Duplex | undefined {
    this.address()
      .then((address) => dialPort(address, this.port))
      .then(
        (stream) => done?.(null, stream),
        (err: Error) => done?.(err, undefined as unknown as Duplex),
      );
    return undefined;
  }
}
