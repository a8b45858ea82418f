/**
 * The "world" of the egress tests, run inside the network namespace world.ts made (never on any
 * outside address): for each name an HTTPS server (its own certificate from the world's CA) and
 * an HTTP server on the name's address, both answering JSON that says which name was asked for
 * and the SHA-256 of the credential header that came (never the header: the answer goes back into the desktop); `/bytes/N` sends N bytes (the benchmark). A raw TCP echo on
 * port 7000 of every address, and a DNS server answering the names (UDP and TCP, port 53).
 *
 * Usage: node --import tsx world-server.ts CONFIG.json; prints `ready` once everything listens.
 */

import { createHash } from "node:crypto";
import dgram from "node:dgram";
import { readFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { createServer as createTcpServer, type Server } from "node:net";
import { join } from "node:path";
import { createSecureContext } from "node:tls";
import { DNS_TYPE, dnsAnswer, parseDnsQuery, RCODE } from "../../src/host/egress/wire.js";

interface WorldConfig {
  dns: string;
  /** Name → IPv4 address. */
  names: Record<string, string>;
  certDir: string;
}

const config = JSON.parse(readFileSync(process.argv[2], "utf8")) as WorldConfig;

function digest(value: string | string[] | undefined): string | null {
  return value === undefined ? null : createHash("sha256").update(String(value)).digest("hex");
}

function handler(req: http.IncomingMessage, res: http.ServerResponse) {
  const bytes = /^\/bytes\/(\d+)$/.exec(req.url ?? "")?.[1];
  if (bytes) {
    let left = Number(bytes);
    const chunk = Buffer.alloc(64 * 1024, 120);
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": left });
    const write = () => {
      while (left > 0) {
        const piece = chunk.subarray(0, Math.min(chunk.length, left));
        left -= piece.length;
        if (!res.write(piece)) return void res.once("drain", write);
      }
      res.end();
    };
    write();
    return;
  }
  const body = JSON.stringify({
    server: (req.socket as { servername?: string }).servername ?? null,
    host: req.headers.host ?? null,
    // Never the credential itself (the answer goes back into the desktop): its SHA-256.
    authorization: digest(req.headers.authorization),
    apiKey: digest(req.headers["x-api-key"]),
    path: req.url,
  });
  res.writeHead(200, { "content-type": "application/json" }).end(body);
}

const byAddress = new Map<string, string[]>();
for (const [name, address] of Object.entries(config.names)) {
  if (address.startsWith("127.")) continue;
  byAddress.set(address, [...(byAddress.get(address) ?? []), name]);
}

const pending: Promise<void>[] = [];
const listen = (server: Server, host: string, port: number) =>
  pending.push(new Promise((resolve, reject) => server.once("error", reject).listen(port, host, resolve)));

for (const [address, names] of byAddress) {
  const contexts = new Map(
    names.map((name) => [
      name,
      createSecureContext({
        key: readFileSync(join(config.certDir, `${name}.key`)),
        cert: readFileSync(join(config.certDir, `${name}.crt`)),
      }),
    ]),
  );
  const first = names[0];
  const secure = https.createServer(
    {
      key: readFileSync(join(config.certDir, `${first}.key`)),
      cert: readFileSync(join(config.certDir, `${first}.crt`)),
      SNICallback: (servername, callback) => callback(null, contexts.get(servername) ?? contexts.get(first)),
    },
    handler,
  );
  listen(secure, address, 443);
  listen(http.createServer(handler), address, 80);
  listen(
    createTcpServer((socket) => {
      socket.on("error", () => undefined);
      socket.write(`echo ${address}\n`);
      socket.pipe(socket);
    }),
    address,
    7000,
  );
}

function answer(message: Buffer): Buffer | undefined {
  const query = parseDnsQuery(message);
  if (!query) return undefined;
  const address = config.names[query.name];
  if (!address) return dnsAnswer(query, RCODE.nxDomain);
  return dnsAnswer(query, RCODE.noError, query.type === DNS_TYPE.A ? [address] : []);
}

const udp = dgram.createSocket("udp4");
udp.on("message", (message, peer) => {
  const reply = answer(message);
  if (reply) udp.send(reply, peer.port, peer.address);
});
pending.push(new Promise((resolve) => udp.bind(53, config.dns, () => resolve())));
listen(
  createTcpServer((socket) => {
    socket.on("error", () => undefined);
    socket.once("data", (data: Buffer) => {
      const reply = answer(data.subarray(2, 2 + data.readUInt16BE(0)));
      if (!reply) return void socket.destroy();
      const length = Buffer.alloc(2);
      length.writeUInt16BE(reply.length);
      socket.end(Buffer.concat([length, reply]));
    });
  }),
  config.dns,
  53,
);

Promise.all(pending).then(
  () => process.stdout.write("ready\n"),
  (err: Error) => {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  },
);
