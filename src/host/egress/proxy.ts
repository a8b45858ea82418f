/**
 * The host-side egress proxy (docs/egress.md). Each caged desktop has a gate of its own: listeners
 * on an address only that desktop reaches (its network's gateway; a loopback port its QEMU
 * forwards to), so the listener a connection arrives on says whose it is. A gate serves:
 *
 * - `proxy`: an HTTP proxy, `CONNECT host:port` (any TCP, TLS untouched) and absolute-URL HTTP;
 * - `http`, `tls`: the same by name without proxy settings: the desktop's DNS answers an allowed
 *   name with the gate's address, and the Host header or the TLS server name (SNI) says where to;
 * - `dns` (UDP and TCP): allowed names answer, others are NXDOMAIN.
 *
 * Every connection is decided when it is made, from the desktop's policy at that moment (a changed
 * policy holds for the next connection), and audited (audit.ts). A name is resolved here, by the
 * host's resolver (or the one given); an address of the host or of a private network is reached
 * only when the policy lists it by address. Node's `http` parses the requests; the relaying is
 * `pipe` both ways, so there is no proxy library underneath (none is among the dependencies, and
 * what is needed, deciding per connection and counting bytes, is this file).
 */

import dgram from "node:dgram";
import { promises as dnsPromises } from "node:dns";
import http from "node:http";
import net, { isIP, type Socket } from "node:net";
import { networkInterfaces } from "node:os";
import type { Duplex } from "node:stream";
import type { EgressAudit, EgressVia } from "./audit.js";
import { type CompiledPolicy, isInternalAddress } from "./policy.js";
import {
  clientHelloServerName,
  DNS_TYPE,
  dnsAnswer,
  MAX_CLIENT_HELLO,
  parseDnsQuery,
  RCODE,
} from "./wire.js";

export interface GatePorts {
  proxy: number;
  http: number;
  tls: number;
  dns: number;
}

export interface GateAddress {
  /** The address the gate's listeners are bound to. */
  host: string;
  /** The ports (0: any free one). */
  ports: GatePorts;
  /** What the desktop's DNS answers an allowed name with: where the desktop reaches `http`/`tls`. */
  answer: string;
  /**
   * Whose connections the gate takes, by their source address, when others can reach its address
   * too (Pods on one network): a stranger's connection is closed before anything of it is read.
   * Left out, every connection is the desktop's (a gate on the desktop's own network or port).
   */
  admit?(address: string): boolean | Promise<boolean>;
}

export interface Gate {
  readonly desktop: string;
  readonly host: string;
  readonly ports: GatePorts;
  close(): Promise<void>;
}

/** A connection the proxy decided to let through, to this address. */
export interface Passage {
  desktop: string;
  via: EgressVia;
  name: string | null;
  address: string;
  port: number;
  rule: string;
}

export interface EgressProxyOptions {
  /** The desktop's policy now (a policy changed a moment ago is the one given). */
  policyOf(desktop: string): CompiledPolicy;
  audit: EgressAudit;
  /** DNS servers for the names desktops ask for (`IP` or `IP:port`); default: the host's resolver. */
  resolvers?: string[];
  /**
   * What takes over an allowed TLS connection whose name has a credential rule (credentials.ts),
   * given the client's socket and what was read of it; undefined to relay it untouched.
   */
  interceptTls?(passage: Passage): ((client: Socket, head: Buffer) => void) | undefined;
}

/** How long an upstream connection may take to open. */
const DIAL_TIMEOUT_MS = 10_000;
/** How long a desktop may take to send its request's head or its TLS hello. */
const HELLO_TIMEOUT_MS = 15_000;
/** Connections one listener keeps at once. */
const MAX_CONNECTIONS = 1024;
/** Headers a proxy does not pass on (RFC 9110 §7.6.1, and the proxy's own). */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

export type Decision =
  | { allowed: true; address: string; rule: string }
  | { allowed: false; address: string | null; rule: string };

export class EgressProxy {
  private readonly gates = new Set<Gate>();
  private readonly resolver?: dnsPromises.Resolver;

  constructor(private readonly options: EgressProxyOptions) {
    if (options.resolvers && options.resolvers.length > 0) {
      this.resolver = new dnsPromises.Resolver({ timeout: 2000, tries: 2 });
      this.resolver.setServers(options.resolvers);
    }
  }

  /** Opens a gate for `desktop`: its listeners, bound and answering when this resolves. */
  async open(desktop: string, where: GateAddress): Promise<Gate> {
    const servers: { close(): void }[] = [];
    const sockets = new Set<Duplex>();
    const track = (socket: Duplex) => {
      sockets.add(socket);
      socket.once("close", () => sockets.delete(socket));
    };
    const admitted = async (address: string | undefined) =>
      !where.admit || (address !== undefined && (await where.admit(plainAddress(address))));
    /**
     * A listener that hands each admitted connection to `take`; nothing is read before that. HTTP's
     * are half-open as Node's own HTTP servers are (a client that ends its side still gets the answer).
     */
    const front = (take: (socket: Socket) => void, allowHalfOpen = false) =>
      net.createServer({ pauseOnConnect: true, allowHalfOpen }, (socket) => {
        track(socket);
        socket.on("error", () => undefined);
        admitted(socket.remoteAddress).then(
          (ok) => {
            if (!ok || socket.destroyed) return socket.destroy();
            take(socket);
            socket.resume();
          },
          () => socket.destroy(),
        );
      });
    try {
      const proxyHttp = this.proxyServer(desktop);
      const transparentHttp = this.transparentHttp(desktop);
      const proxy = front((socket) => proxyHttp.emit("connection", socket), true);
      const httpServer = front((socket) => transparentHttp.emit("connection", socket), true);
      const tls = front((socket) => this.transparentTls(desktop, socket));
      const dnsTcp = front((socket) => this.dnsOverTcp(desktop, where.answer, socket));
      const dnsUdp = dgram.createSocket({ type: isIP(where.host) === 6 ? "udp6" : "udp4" });
      dnsUdp.on("message", (message, peer) => {
        void admitted(peer.address)
          .then((ok) => (ok ? this.answerDns(desktop, where.answer, message) : undefined))
          .then((reply) => {
            if (reply) dnsUdp.send(reply, peer.port, peer.address);
          })
          .catch(() => undefined);
      });
      for (const server of [proxy, httpServer, tls, dnsTcp]) {
        server.maxConnections = MAX_CONNECTIONS;
        server.on("error", () => undefined);
      }
      const listen = async (server: net.Server, port: number) => {
        servers.push(server);
        await new Promise<void>((resolve, reject) => {
          server.once("error", reject);
          server.listen({ host: where.host, port, exclusive: true }, () => {
            server.off("error", reject);
            resolve();
          });
        });
        return (server.address() as net.AddressInfo).port;
      };
      const ports: GatePorts = {
        proxy: await listen(proxy, where.ports.proxy),
        http: await listen(httpServer, where.ports.http),
        tls: await listen(tls, where.ports.tls),
        dns: await listen(dnsTcp, where.ports.dns),
      };
      servers.push(dnsUdp);
      await new Promise<void>((resolve, reject) => {
        dnsUdp.once("error", reject);
        dnsUdp.bind({ address: where.host, port: ports.dns, exclusive: true }, () => {
          dnsUdp.off("error", reject);
          dnsUdp.on("error", () => undefined);
          resolve();
        });
      });
      const gate: Gate = {
        desktop,
        host: where.host,
        ports,
        close: async () => {
          this.gates.delete(gate);
          for (const socket of sockets) socket.destroy();
          await Promise.all(servers.map((server) => closeQuietly(server)));
        },
      };
      this.gates.add(gate);
      return gate;
    } catch (err) {
      for (const socket of sockets) socket.destroy();
      await Promise.all(servers.map((server) => closeQuietly(server)));
      throw err;
    }
  }

  async close() {
    await Promise.all([...this.gates].map((gate) => gate.close()));
  }

  /**
   * Whether `desktop` may connect to `host` (a name or an address) on `port`, and to which
   * address: the policy's word on the name, then on each address it resolves to.
   */
  async decide(desktop: string, host: string, port: number): Promise<Decision> {
    const policy = this.options.policyOf(desktop);
    const target = host
      .toLowerCase()
      .replace(/\.$/, "")
      .replace(/^\[(.*)\]$/, "$1");
    const own = hostAddresses();
    if (isIP(target)) {
      const verdict = policy.allowsAddress(target, port, isInternalAddress(target, own));
      return { ...verdict, address: target } as Decision;
    }
    if (!/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(target) || target.length > 253) {
      return { allowed: false, address: null, rule: "not a valid host name" };
    }
    const verdict = policy.allowsName(target, port);
    if (!verdict.allowed) return { allowed: false, address: null, rule: verdict.rule };
    let addresses: string[];
    try {
      addresses = await this.resolve(target);
    } catch (err) {
      return {
        allowed: false,
        address: null,
        rule: `does not resolve (${(err as NodeJS.ErrnoException).code ?? "error"})`,
      };
    }
    if (addresses.length === 0) return { allowed: false, address: null, rule: "does not resolve" };
    for (const address of addresses) {
      if (!isInternalAddress(address, own)) return { allowed: true, address, rule: verdict.rule };
      const listed = policy.allowsAddress(address, port, true);
      if (listed.allowed) return { allowed: true, address, rule: `${verdict.rule}, ${listed.rule}` };
    }
    return {
      allowed: false,
      address: addresses[0],
      rule: `resolves to ${addresses[0]}, an address of the host or a private network (allow it by address)`,
    };
  }

  /** The addresses of a name, IPv4 first. */
  async resolve(name: string): Promise<string[]> {
    if (!this.resolver) {
      const found = await dnsPromises.lookup(name, { all: true, order: "ipv4first" });
      return found.map((a) => a.address);
    }
    const [v4, v6] = await Promise.all([
      this.resolver.resolve4(name).catch(noData),
      this.resolver.resolve6(name).catch(noData),
    ]);
    return [...v4, ...v6];
  }

  // ---- the listeners ----

  private proxyServer(desktop: string): http.Server {
    const server = http.createServer({ requestTimeout: 300_000, headersTimeout: HELLO_TIMEOUT_MS });
    server.on("connect", (req: http.IncomingMessage, client: Socket, head: Buffer) => {
      client.on("error", () => undefined);
      const match = /^(\[[0-9a-fA-F:.]+\]|[^:\s/]+):(\d{1,5})$/.exec(req.url ?? "");
      const port = Number(match?.[2]);
      if (!match || port < 1 || port > 65535) {
        client.end(
          "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\r\nCONNECT host:port expected\n",
        );
        return;
      }
      void this.tunnel({ desktop, via: "connect", host: match[1], port, client, head, established: true });
    });
    server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
      let url: URL;
      try {
        url = new URL(req.url ?? "");
      } catch {
        res.writeHead(400, { "content-type": "text/plain" }).end("An absolute http:// URL is expected\n");
        return;
      }
      if (url.protocol !== "http:") {
        res
          .writeHead(400, { "content-type": "text/plain" })
          .end("Only http:// URLs are proxied as requests: use CONNECT for others\n");
        return;
      }
      void this.forward(
        desktop,
        "proxy",
        req,
        res,
        url.hostname,
        Number(url.port || 80),
        `${url.pathname}${url.search}`,
      );
    });
    return server;
  }

  private transparentHttp(desktop: string): http.Server {
    const server = http.createServer({ requestTimeout: 300_000, headersTimeout: HELLO_TIMEOUT_MS });
    server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
      const host = /^(\[[^\]]+\]|[^:]+)/.exec(req.headers.host ?? "")?.[1];
      if (!host) {
        res.writeHead(400, { "content-type": "text/plain" }).end("A Host header is expected\n");
        return;
      }
      void this.forward(desktop, "http", req, res, host, 80, req.url ?? "/");
    });
    return server;
  }

  /** Reads the ClientHello for its server name, then decides and relays (or hands it over). */
  private transparentTls(desktop: string, client: Socket) {
    client.on("error", () => undefined);
    client.setTimeout(HELLO_TIMEOUT_MS, () => client.destroy());
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const name = clientHelloServerName(head);
      if (name === undefined && head.length < MAX_CLIENT_HELLO) return;
      client.off("data", onData);
      client.pause();
      client.setTimeout(0);
      if (!name) {
        this.options.audit.record({
          desktop,
          via: "tls",
          name: null,
          address: null,
          port: 443,
          allowed: false,
          rule: "a TLS connection without a server name (SNI)",
        });
        client.destroy();
        return;
      }
      void this.tunnel({ desktop, via: "tls", host: name, port: 443, client, head, established: false });
    };
    client.on("data", onData);
  }

  /** Decides, dials and relays a TCP connection (CONNECT, or TLS by name). */
  private async tunnel(t: {
    desktop: string;
    via: EgressVia;
    host: string;
    port: number;
    client: Socket;
    head: Buffer;
    /** Answer `200 Connection Established` first (CONNECT). */
    established: boolean;
  }) {
    const { desktop, via, port, client } = t;
    const name = isIP(t.host.replace(/^\[(.*)\]$/, "$1")) ? null : t.host.toLowerCase().replace(/\.$/, "");
    const decision = await this.decide(desktop, t.host, port);
    const shown = name ?? t.host.replace(/^\[(.*)\]$/, "$1");
    if (!decision.allowed) {
      this.refused(desktop, via, name, decision, port);
      if (t.established) client.end(refusal(shown, port, decision.rule));
      else client.destroy();
      return;
    }
    const passage: Passage = { desktop, via, name, address: decision.address, port, rule: decision.rule };
    const taker = name ? this.options.interceptTls?.(passage) : undefined;
    if (taker) {
      if (t.established) client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      taker(client, t.head);
      return;
    }
    let upstream: Socket;
    try {
      upstream = await dial(decision.address, port);
    } catch (err) {
      this.failed(passage, err as Error);
      if (t.established) client.end(badGateway(shown, port, err as Error));
      else client.destroy();
      return;
    }
    if (client.destroyed) {
      upstream.destroy();
      return;
    }
    if (t.established) client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (t.head.length > 0) upstream.write(t.head);
    const before = { out: client.bytesRead, in: client.bytesWritten };
    relay(client, upstream, () => {
      this.options.audit.record({
        ...passage,
        allowed: true,
        bytesOut: client.bytesRead - before.out + t.head.length,
        bytesIn: client.bytesWritten - before.in,
      });
    });
    client.resume();
  }

  /** One HTTP request, passed on to where its name resolves (hop-by-hop headers left out). */
  private async forward(
    desktop: string,
    via: EgressVia,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    host: string,
    port: number,
    path: string,
  ) {
    const bare = host.replace(/^\[(.*)\]$/, "$1");
    const name = isIP(bare) ? null : bare.toLowerCase().replace(/\.$/, "");
    const decision = await this.decide(desktop, host, port);
    if (!decision.allowed) {
      this.refused(desktop, via, name, decision, port);
      res.writeHead(403, { "content-type": "text/plain", "x-hangar-egress": "refused" });
      res.end(refusal(name ?? bare, port, decision.rule, false));
      return;
    }
    const passage: Passage = { desktop, via, name, address: decision.address, port, rule: decision.rule };
    const headers: http.OutgoingHttpHeaders = {};
    for (const [key, value] of Object.entries(req.headers)) {
      if (!HOP_BY_HOP.has(key) && value !== undefined) headers[key] = value;
    }
    const upstream = http.request({
      host: decision.address,
      port,
      method: req.method,
      path,
      headers,
      setHost: false,
      agent: false,
      timeout: DIAL_TIMEOUT_MS,
    });
    let socket: Socket | undefined;
    upstream.on("socket", (s) => {
      socket = s;
    });
    const done = (error?: Error) => {
      if (error) this.failed(passage, error);
      else
        this.options.audit.record({
          ...passage,
          allowed: true,
          bytesOut: socket?.bytesWritten ?? 0,
          bytesIn: socket?.bytesRead ?? 0,
        });
    };
    upstream.on("timeout", () => upstream.destroy(new Error("the server did not answer in time")));
    upstream.on("error", (err) => {
      done(err);
      if (!res.headersSent)
        res.writeHead(502, { "content-type": "text/plain" }).end(badGateway(name ?? bare, port, err, false));
      else res.destroy();
    });
    upstream.on("response", (answer) => {
      upstream.setTimeout(0);
      const out: http.OutgoingHttpHeaders = {};
      for (const [key, value] of Object.entries(answer.headers)) {
        if (!HOP_BY_HOP.has(key) && value !== undefined) out[key] = value;
      }
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
      answer.pipe(res);
      answer.once("end", () => done());
      answer.once("error", (err) => done(err));
    });
    res.once("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }

  // ---- DNS ----

  private dnsOverTcp(desktop: string, answer: string, socket: Socket) {
    socket.on("error", () => undefined);
    socket.setTimeout(HELLO_TIMEOUT_MS, () => socket.destroy());
    let buffered = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length > 4096) {
        socket.destroy();
        return;
      }
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const message = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
        buffered = buffered.subarray(2 + message.length);
        void this.answerDns(desktop, answer, Buffer.from(message)).then((reply) => {
          if (!reply || socket.destroyed) return;
          const length = Buffer.alloc(2);
          length.writeUInt16BE(reply.length);
          socket.write(Buffer.concat([length, reply]));
        });
      }
    });
  }

  /**
   * The answer to one query: REFUSED when the desktop's DNS is off; on the open network the
   * name's own addresses; under an allow list, an allowed name is the gate's address (A) and has
   * no AAAA, anything else NXDOMAIN.
   */
  async answerDns(desktop: string, answer: string, message: Buffer): Promise<Buffer | undefined> {
    const query = parseDnsQuery(message);
    if (!query) return undefined;
    const policy = this.options.policyOf(desktop);
    const audit = (allowed: boolean, rule: string) =>
      this.options.audit.record({
        desktop,
        via: "dns",
        name: query.name,
        address: null,
        port: null,
        allowed,
        rule,
      });
    if (!policy.dns) {
      audit(false, "DNS is off for this desktop");
      return dnsAnswer(query, RCODE.refused);
    }
    const isAddressType = query.type === DNS_TYPE.A || query.type === DNS_TYPE.AAAA;
    if (policy.policy.egress === "allow") {
      if (!isAddressType) return dnsAnswer(query, RCODE.noError);
      const addresses = await this.resolve(query.name).catch(() => undefined);
      if (!addresses) return dnsAnswer(query, RCODE.nxDomain);
      const family = query.type === DNS_TYPE.A ? 4 : 6;
      return dnsAnswer(
        query,
        RCODE.noError,
        addresses.filter((a) => isIP(a) === family),
        30,
      );
    }
    if (!policy.knowsName(query.name)) {
      audit(false, policy.allowsName(query.name, 443).rule);
      return dnsAnswer(query, RCODE.nxDomain);
    }
    if (query.type !== DNS_TYPE.A) return dnsAnswer(query, RCODE.noError);
    return dnsAnswer(query, RCODE.noError, [answer]);
  }

  // ---- the audit ----

  private refused(desktop: string, via: EgressVia, name: string | null, decision: Decision, port: number) {
    this.options.audit.record({
      desktop,
      via,
      name,
      address: decision.address,
      port,
      allowed: false,
      rule: decision.rule,
    });
  }

  private failed(passage: Passage, err: Error) {
    this.options.audit.record({
      ...passage,
      allowed: true,
      rule: `${passage.rule} (failed: ${err.message})`,
      bytesOut: 0,
      bytesIn: 0,
    });
  }
}

/** Opens a TCP connection, within DIAL_TIMEOUT_MS. */
export function dial(address: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: address, port });
    socket.setTimeout(DIAL_TIMEOUT_MS, () =>
      socket.destroy(new Error(`connecting to ${address}:${port} timed out`)),
    );
    socket.once("error", reject);
    socket.once("connect", () => {
      socket.setTimeout(0);
      socket.off("error", reject);
      resolve(socket);
    });
  });
}

/** Bytes both ways until either side ends; `ended` once both sockets are closed. */
export function relay(a: Duplex, b: Duplex, ended: () => void) {
  let open = 2;
  const closed = () => {
    open -= 1;
    if (open === 0) ended();
  };
  for (const [from, to] of [
    [a, b],
    [b, a],
  ] as const) {
    from.on("error", () => to.destroy());
    from.once("close", () => {
      to.destroy();
      closed();
    });
    from.pipe(to);
  }
}

function refusal(target: string, port: number, rule: string, asHead = true): string {
  const text = `Hangar egress: refused ${target}:${port} (${rule})\n`;
  return asHead
    ? `HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nX-Hangar-Egress: refused\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`
    : text;
}

function badGateway(target: string, port: number, err: Error, asHead = true): string {
  const text = `Hangar egress: ${target}:${port} is allowed but could not be reached: ${err.message}\n`;
  return asHead
    ? `HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`
    : text;
}

/** Every address the host has on any interface. */
function hostAddresses(): Set<string> {
  const own = new Set<string>();
  for (const list of Object.values(networkInterfaces())) {
    for (const info of list ?? []) own.add(info.address.replace(/%.*$/, ""));
  }
  return own;
}

function noData(err: NodeJS.ErrnoException): string[] {
  if (err.code === "ENODATA" || err.code === "ENOTFOUND") return [];
  throw err;
}

/** An IPv4 address as itself, not as the IPv6 form a dual-stack listener may give it. */
function plainAddress(address: string): string {
  return address.startsWith("::ffff:") && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

function closeQuietly(server: { close(callback?: () => void): unknown }): Promise<void> {
  return new Promise((resolve) => {
    try {
      if ("closeAllConnections" in server) (server as http.Server).closeAllConnections();
      server.close(() => resolve());
    } catch {
      resolve();
    }
  });
}
