/**
 * Credentials added outside the desktop (docs/egress.md). For a domain with a credential rule, the
 * egress proxy ends the desktop's TLS itself, with a certificate for that name signed by the
 * desktop's own CA (certificates.ts; Hangar installs the CA in the desktop's trust stores), reads
 * each request with Node's HTTP parser, adds the rule's header with the secret's value, and sends
 * the request on over a TLS connection of its own, whose server certificate it checks. Only those
 * domains are opened this way; every other TLS connection is relayed untouched.
 *
 * Each request is decided again (the policy may have changed since the connection opened), its
 * Host must be the name the connection was opened for, and each is audited with the secret's name
 * (never its value).
 */
import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import { Duplex } from "node:stream";
import tls from "node:tls";
import type { EgressAudit } from "./audit.js";
import { type CertificateFiles, ensureLeaf, readPair } from "./certificates.js";
import type { CompiledPolicy } from "./policy.js";
import type { Passage } from "./proxy.js";
import type { SecretStore } from "./secrets.js";

/** Headers not passed on (hop-by-hop, and the proxy's). */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

export interface CredentialOptions {
  policyOf(desktop: string): CompiledPolicy;
  secrets: SecretStore;
  audit: EgressAudit;
  /** The desktop's CA and the directory its certificates are kept in. */
  caOf(desktop: string): Promise<{ ca: CertificateFiles; leaves: string }>;
  /** More CAs the servers' certificates may be signed by (PEM), beside the usual roots. */
  upstreamCa?: string[];
}

export class CredentialInjector {
  private readonly server: http.Server;
  private readonly passages = new WeakMap<Socket, Passage>();
  private readonly contexts = new Map<string, Promise<tls.SecureContext>>();
  private readonly agent: https.Agent;

  constructor(private readonly options: CredentialOptions) {
    this.server = http.createServer({ requestTimeout: 300_000 }, (req, res) => this.handle(req, res));
    this.agent = new https.Agent({
      keepAlive: true,
      maxSockets: 64,
      ca: options.upstreamCa ? [...tls.rootCertificates, ...options.upstreamCa] : undefined,
    });
  }

  /**
   * What takes over the client's socket when `passage` is HTTPS to a name with a credential rule;
   * undefined to have it relayed untouched.
   */
  takerFor(passage: Passage): ((client: Socket, head: Buffer) => void) | undefined {
    if (!passage.name || passage.port !== 443) return undefined;
    if (!this.options.policyOf(passage.desktop).credentialFor(passage.name)) return undefined;
    return (client, head) => this.intercept(passage, client, head);
  }

  private intercept(passage: Passage, client: Socket, head: Buffer) {
    const name = passage.name ?? "";
    client.pause();
    this.contextFor(passage.desktop, name).then(
      (secureContext) => {
        // A socket's own bytes go to TLS below JavaScript: what was read of it already is put first.
        const source = head.length > 0 ? withHead(head, client) : client;
        const secure = new tls.TLSSocket(source, {
          isServer: true,
          secureContext,
          ALPNProtocols: ["http/1.1"],
        });
        secure.on("error", () => client.destroy());
        this.passages.set(secure, passage);
        this.server.emit("connection", secure);
        client.resume();
      },
      (err: Error) => {
        this.options.audit.record({
          ...passage,
          allowed: false,
          rule: `no certificate for the name: ${err.message}`,
        });
        client.destroy();
      },
    );
  }

  close() {
    this.server.closeAllConnections();
    this.server.close();
    this.agent.destroy();
  }

  /** The desktop's certificate for `name`, made once. */
  private contextFor(desktop: string, name: string): Promise<tls.SecureContext> {
    const key = `${desktop}\n${name}`;
    let context = this.contexts.get(key);
    if (!context) {
      context = (async () => {
        const { ca, leaves } = await this.options.caOf(desktop);
        const leaf = await readPair(await ensureLeaf(ca, leaves, name));
        const caPem = (await readPair({ cert: ca.cert, key: ca.key })).cert;
        return tls.createSecureContext({ key: leaf.key, cert: `${leaf.cert}${caPem}` });
      })();
      context.catch(() => this.contexts.delete(key));
      this.contexts.set(key, context);
    }
    return context;
  }

  /** Forgets a desktop's certificates (it is gone). */
  forget(desktop: string) {
    for (const key of this.contexts.keys()) if (key.startsWith(`${desktop}\n`)) this.contexts.delete(key);
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const passage = this.passages.get(req.socket);
    if (!passage?.name) {
      res.writeHead(500).end();
      return;
    }
    const name = passage.name;
    const refuse = (status: number, rule: string) => {
      this.options.audit.record({ ...passage, allowed: false, rule });
      res.writeHead(status, { "content-type": "text/plain", "x-hangar-egress": "refused" });
      res.end(`Hangar egress: refused ${name}:443 (${rule})\n`);
    };
    const host = (req.headers.host ?? "").replace(/:443$/, "").toLowerCase();
    if (host !== name) return refuse(421, `the request is for '${host}', not ${name}`);
    const policy = this.options.policyOf(passage.desktop);
    const verdict = policy.allowsName(name, 443);
    if (!verdict.allowed) return refuse(403, verdict.rule);
    const rule = policy.credentialFor(name);
    const headers: http.OutgoingHttpHeaders = {};
    for (const [key, value] of Object.entries(req.headers)) {
      if (!HOP_BY_HOP.has(key) && value !== undefined) headers[key] = value;
    }
    if (rule) {
      const secret = this.options.secrets.value(rule.secret);
      if (secret === undefined) return refuse(502, `the secret '${rule.secret}' is not set`);
      const header = (rule.header ?? "Authorization").toLowerCase();
      headers[header] = (rule.value ?? "Bearer {secret}").split("{secret}").join(secret);
    }
    const upstream = https.request({
      host: passage.address,
      port: 443,
      servername: name,
      method: req.method,
      path: req.url,
      headers,
      agent: this.agent,
      timeout: 30_000,
    });
    let bytesIn = 0;
    let bytesOut = 0;
    req.on("data", (chunk: Buffer) => {
      bytesOut += chunk.length;
    });
    const audit = (error?: Error) =>
      this.options.audit.record({
        ...passage,
        allowed: true,
        rule: error ? `${verdict.rule} (failed: ${error.message})` : verdict.rule,
        bytesOut,
        bytesIn,
        ...(rule && { credential: rule.secret }),
      });
    upstream.on("timeout", () => upstream.destroy(new Error("the server did not answer in time")));
    upstream.on("error", (err) => {
      audit(err);
      if (!res.headersSent)
        res
          .writeHead(502, { "content-type": "text/plain" })
          .end(`Hangar egress: ${name}:443 could not be reached: ${err.message}\n`);
      else res.destroy();
    });
    upstream.on("response", (answer) => {
      const out: http.OutgoingHttpHeaders = {};
      for (const [key, value] of Object.entries(answer.headers)) {
        if (!HOP_BY_HOP.has(key) && value !== undefined) out[key] = value;
      }
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, out);
      answer.on("data", (chunk: Buffer) => {
        bytesIn += chunk.length;
      });
      answer.pipe(res);
      answer.once("end", () => audit());
    });
    res.once("close", () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }
}

/** `socket` as a stream that first gives `head` (bytes read off it before), then its own. */
function withHead(head: Buffer, socket: Socket): Duplex {
  const stream = new Duplex({
    read() {
      socket.resume();
    },
    write(chunk, _encoding, callback) {
      socket.write(chunk, callback);
    },
    final(callback) {
      socket.end();
      callback();
    },
    destroy(err, callback) {
      socket.destroy();
      callback(err);
    },
  });
  stream.push(head);
  socket.on("data", (chunk: Buffer) => {
    if (!stream.push(chunk)) socket.pause();
  });
  socket.once("end", () => stream.push(null));
  socket.once("close", () => stream.destroy());
  socket.on("error", (err) => stream.destroy(err));
  return stream;
}
