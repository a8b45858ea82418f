/**
 * What the egress proxy costs (docs/egress.md): a 10 MB HTTPS download and a small HTTPS request,
 * straight to the server, through the proxy (`CONNECT`, TLS relayed untouched) and through the
 * proxy adding a credential (TLS ended at the proxy and opened again to the server). The server is
 * in a network namespace this benchmark makes (test/egress/world.ts); the proxy's gate listens on
 * loopback, as a QEMU desktop's forwards reach it. Rounds alternate the three ways, so that the
 * machine's load weighs on each alike. Needs root (the namespace), like the tests.
 *
 * Run: node --import tsx bench/egress.ts [rounds]
 */

import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import { EgressAudit } from "../src/host/egress/audit.js";
import { ensureCa } from "../src/host/egress/certificates.js";
import { CredentialInjector } from "../src/host/egress/credentials.js";
import { compilePolicy } from "../src/host/egress/policy.js";
import { EgressProxy } from "../src/host/egress/proxy.js";
import { SecretStore } from "../src/host/egress/secrets.js";
import { HostLog } from "../src/host/host-log.js";
import { connectThrough } from "../test/egress/clients.js";
import { startWorld } from "../test/egress/world.js";
import { printTable, type Row, sample, summarize, summarizeRates } from "./lib.js";

const ROUNDS = Number(process.argv[2] ?? 10);
const BYTES = 10 * 1024 * 1024;

const world = await startWorld(["plain.example.test", "api.example.test"]);
const dir = mkdtempSync(join(tmpdir(), "hangar-bench-egress-"));
const log = new HostLog(async () => join(dir, "logs"));
const audit = new EgressAudit(log);
const secrets = new SecretStore(async () => join(dir, "secrets.json"));
await secrets.set({ name: "token", value: "bench-token" });
const policy = compilePolicy({
  egress: { allow: ["plain.example.test", "api.example.test"] },
  credentials: [{ domain: "api.example.test", secret: "token" }],
});
const ca = await ensureCa(join(dir, "ca"), "bench desktop CA");
const credentials = new CredentialInjector({
  policyOf: () => policy,
  secrets,
  audit,
  caOf: async () => ({ ca, leaves: join(dir, "leaves") }),
  upstreamCa: [world.caPem],
});
const proxy = new EgressProxy({
  policyOf: () => policy,
  audit,
  resolvers: [world.dns],
  interceptTls: (passage) => credentials.takerFor(passage),
});
const gate = await proxy.open("bench", {
  host: "127.0.0.1",
  ports: { proxy: 0, http: 0, tls: 0, dns: 0 },
  answer: "127.0.0.1",
});
const trust = [world.caPem, (await import("node:fs")).readFileSync(ca.cert, "utf8")];

type Way = "direct" | "proxy (CONNECT)" | "proxy + credential";
const WAYS: [Way, string][] = [
  ["direct", "plain.example.test"],
  ["proxy (CONNECT)", "plain.example.test"],
  ["proxy + credential", "api.example.test"],
];

/** A TLS connection to `name`, straight or through the gate. */
async function open(way: Way, name: string): Promise<tls.TLSSocket> {
  let socket: Socket | undefined;
  if (way !== "direct") {
    const tunnel = await connectThrough({ host: "127.0.0.1", port: gate.ports.proxy }, `${name}:443`);
    if (!tunnel.socket) throw new Error(`the proxy refused ${name}: ${tunnel.body}`);
    socket = tunnel.socket;
  }
  return new Promise((resolve, reject) => {
    const secure = tls.connect(
      { ...(socket ? { socket } : { host: world.addressOf(name), port: 443 }), servername: name, ca: trust },
      () => resolve(secure),
    );
    secure.once("error", reject);
  });
}

/** One GET on a new connection; the bytes of its body. */
async function get(way: Way, name: string, path: string): Promise<number> {
  const secure = await open(way, name);
  return new Promise((resolve, reject) => {
    const req = http.request({
      createConnection: () => secure,
      path,
      headers: { host: name, connection: "close" },
    });
    req.on("response", (res) => {
      let bytes = 0;
      res.on("data", (c: Buffer) => {
        bytes += c.length;
      });
      res.on("end", () => resolve(bytes));
    });
    req.on("error", reject);
    req.end();
  });
}

const rates: Record<Way, number[]> = { direct: [], "proxy (CONNECT)": [], "proxy + credential": [] };
const small: Record<Way, number[]> = { direct: [], "proxy (CONNECT)": [], "proxy + credential": [] };
try {
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? WAYS : [...WAYS].reverse();
    for (const [way, name] of order) {
      const start = performance.now();
      const got = await get(way, name, `/bytes/${BYTES}`);
      if (got !== BYTES) throw new Error(`${way}: ${got} bytes instead of ${BYTES}`);
      rates[way].push(BYTES / 1024 / 1024 / ((performance.now() - start) / 1000));
      small[way].push(...(await sample(10, () => get(way, name, "/small"), { warmup: 1 })));
    }
  }
} finally {
  await gate.close();
  await proxy.close();
  credentials.close();
  await log.flush();
  await world.cleanup();
  rmSync(dir, { recursive: true, force: true });
}
const rows: Row[] = [];
for (const [way] of WAYS)
  rows.push({ name: `10 MB over HTTPS, ${way}`, ...summarizeRates(rates[way]), note: `${ROUNDS} downloads` });
for (const [way] of WAYS) {
  rows.push({
    name: `small HTTPS GET (new connection), ${way}`,
    ...summarize(small[way]),
    note: `${small[way].length} requests`,
  });
}
printTable(`Egress proxy: ${ROUNDS} interleaved rounds, the server in a network namespace`, rows);
