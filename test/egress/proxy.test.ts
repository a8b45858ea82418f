/**
 * The egress proxy against a world of its own (world.ts: a network namespace with HTTPS servers and
 * DNS for a few names): one gate on loopback ports, as a QEMU desktop's forwards reach it, and a
 * policy changed between requests. What the desktop would see (answers, refusals) and what the
 * audit says are both checked.
 */
import dgram from "node:dgram";
import { mkdtempSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EgressAudit, type EgressEvent } from "../../src/host/egress/audit.js";
import { type CompiledPolicy, compilePolicy, type NetworkPolicy } from "../../src/host/egress/policy.js";
import { EgressProxy, type Gate } from "../../src/host/egress/proxy.js";
import { HostLog } from "../../src/host/host-log.js";
import { connectThrough, httpsByName, httpsViaProxy, httpViaProxy, lookupAt } from "./clients.js";
import { startWorld, type World } from "./world.js";

const DESKTOP = "caged";
let world: World;
let proxy: EgressProxy;
let gate: Gate;
let audit: EgressAudit;
let log: HostLog;
let logDir: string;
let policy: CompiledPolicy;
const setPolicy = (p: NetworkPolicy) => {
  policy = compilePolicy(p);
};
const proxyAt = () => ({ host: "127.0.0.1", port: gate.ports.proxy });
const lastEvent = () => audit.list(DESKTOP).at(-1);
/** The next event the audit records that matches (an allowed connection is recorded when it ends). */
const nextEvent = (match: (e: EgressEvent) => boolean) =>
  new Promise<EgressEvent>((resolve) => {
    const stop = audit.subscribe((e) => {
      if (!match(e)) return;
      stop();
      resolve(e);
    });
  });

beforeAll(async () => {
  world = await startWorld(["allowed.example.test", "api.example.test", "evil.example.net"], {
    "loop.example.test": "127.0.0.1",
  });
  logDir = mkdtempSync(join(tmpdir(), "hangar-egress-log-"));
  log = new HostLog(async () => logDir);
  audit = new EgressAudit(log);
  setPolicy({ egress: "deny" });
  proxy = new EgressProxy({ policyOf: () => policy, audit, resolvers: [world.dns] });
  gate = await proxy.open(DESKTOP, {
    host: "127.0.0.1",
    ports: { proxy: 0, http: 0, tls: 0, dns: 0 },
    answer: "127.0.0.1",
  });
}, 120_000);

afterAll(async () => {
  await proxy?.close();
  await world?.cleanup();
  await log?.flush();
  if (logDir) await rm(logDir, { recursive: true, force: true });
});

describe("names by the allow list", () => {
  it("an allowed name answers through CONNECT, by SNI and as plain HTTP; others are refused at connect time", async () => {
    setPolicy({ egress: { allow: ["allowed.example.test", "*.example.test:443"] } });
    const closed = nextEvent((e) => e.allowed && e.via === "connect");
    const viaProxy = await httpsViaProxy(proxyAt(), "allowed.example.test", "/a", world.caPem);
    expect(viaProxy.status).toBe(200);
    expect(JSON.parse(viaProxy.body)).toMatchObject({ server: "allowed.example.test", path: "/a" });
    const event = await closed;
    expect(event).toMatchObject({
      desktop: DESKTOP,
      via: "connect",
      name: "allowed.example.test",
      address: world.addressOf("allowed.example.test"),
      port: 443,
      allowed: true,
      rule: "allowed.example.test",
    });
    expect(event.bytesIn).toBeGreaterThan(100);

    const tlsClosed = nextEvent((e) => e.allowed && e.via === "tls");
    const byName = await httpsByName(
      { host: "127.0.0.1", port: gate.ports.tls },
      "api.example.test",
      "/b",
      world.caPem,
    );
    expect(JSON.parse(byName.body)).toMatchObject({ server: "api.example.test", path: "/b" });
    expect(await tlsClosed).toMatchObject({
      via: "tls",
      name: "api.example.test",
      allowed: true,
      rule: "*.example.test:443",
    });

    const plain = await httpViaProxy(proxyAt(), "http://allowed.example.test/c");
    expect(JSON.parse(plain.body)).toMatchObject({ host: "allowed.example.test", path: "/c" });

    // The wildcard names port 443 only: plain HTTP to api.example.test is refused, and says why.
    const wrongPort = await httpViaProxy(proxyAt(), "http://api.example.test/d");
    expect(wrongPort.status).toBe(403);
    expect(wrongPort.body).toContain(
      "refused api.example.test:80 (port 80 is not allowed (only '*.example.test:443'))",
    );

    const evil = await connectThrough(proxyAt(), "evil.example.net:443");
    expect(evil.status).toBe(403);
    expect(evil.body).toContain("refused evil.example.net:443 (not in the allow list)");
    expect(lastEvent()).toMatchObject({
      via: "connect",
      name: "evil.example.net",
      port: 443,
      allowed: false,
      rule: "not in the allow list",
    });
    await expect(
      httpsByName({ host: "127.0.0.1", port: gate.ports.tls }, "evil.example.net", "/", world.caPem),
    ).rejects.toThrow();
    expect(lastEvent()).toMatchObject({ via: "tls", name: "evil.example.net", allowed: false });
  });

  it("the desktop's DNS answers allowed names with the gate and no others", async () => {
    setPolicy({ egress: { allow: ["allowed.example.test"] } });
    const server = `127.0.0.1:${gate.ports.dns}`;
    expect(await lookupAt(server, "allowed.example.test")).toEqual(["127.0.0.1"]);
    expect(await lookupAt(server, "evil.example.net")).toBe("ENOTFOUND");
    expect(lastEvent()).toMatchObject({ via: "dns", name: "evil.example.net", allowed: false });
    setPolicy({ egress: { allow: ["allowed.example.test"] }, dns: false });
    expect(await lookupAt(server, "allowed.example.test")).toBe("EREFUSED");
    setPolicy({ egress: "allow" });
    expect(await lookupAt(server, "evil.example.net")).toEqual([world.addressOf("evil.example.net")]);
  });

  it("a changed policy holds for the very next connection", async () => {
    setPolicy({ egress: { allow: ["allowed.example.test"] } });
    expect((await connectThrough(proxyAt(), "evil.example.net:443")).status).toBe(403);
    setPolicy({ egress: { allow: ["allowed.example.test", "evil.example.net"] } });
    const now = await httpsViaProxy(proxyAt(), "evil.example.net", "/", world.caPem);
    expect(JSON.parse(now.body)).toMatchObject({ server: "evil.example.net" });
    setPolicy({ egress: "deny" });
    const denied = await connectThrough(proxyAt(), "allowed.example.test:443");
    expect(denied.status).toBe(403);
    expect(denied.body).toContain("(egress deny)");
  });
});

describe("a gate on an address that others reach too", () => {
  it("takes connections and DNS queries from its desktop's address alone", async () => {
    setPolicy({ egress: { allow: ["allowed.example.test"] } });
    const shared = await proxy.open(DESKTOP, {
      host: "127.0.0.1",
      ports: { proxy: 0, http: 0, tls: 0, dns: 0 },
      answer: "127.0.0.1",
      admit: async (address) => address === "127.0.0.2",
    });
    try {
      const ask = (from: string) =>
        new Promise<string>((resolve) => {
          const socket = createConnection({
            host: "127.0.0.1",
            port: shared.ports.proxy,
            localAddress: from,
          });
          let answer = "";
          socket.on("connect", () =>
            socket.write("CONNECT allowed.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n"),
          );
          socket.on("data", (chunk) => {
            answer += chunk.toString();
            if (answer.includes("\r\n\r\n")) socket.destroy();
          });
          socket.on("error", () => undefined);
          socket.on("close", () => resolve(answer.split("\r\n")[0] || "closed"));
        });
      expect(await ask("127.0.0.1")).toBe("closed");
      expect(await ask("127.0.0.2")).toBe("HTTP/1.1 200 Connection Established");

      // DNS over UDP: the stranger asks first and hears nothing; the desktop's answer comes.
      const stranger = dgram.createSocket("udp4");
      const desktop = dgram.createSocket("udp4");
      const heard: Buffer[] = [];
      stranger.on("message", (m) => heard.push(m));
      await new Promise<void>((r) => stranger.bind(0, "127.0.0.1", r));
      await new Promise<void>((r) => desktop.bind(0, "127.0.0.2", r));
      const answered = new Promise<Buffer>((r) => desktop.once("message", r));
      stranger.send(dnsQuery("allowed.example.test"), shared.ports.dns, "127.0.0.1");
      desktop.send(dnsQuery("allowed.example.test"), shared.ports.dns, "127.0.0.1");
      expect((await answered).readUInt16BE(6)).toBe(1);
      expect(heard).toEqual([]);
      stranger.close();
      desktop.close();
    } finally {
      await shared.close();
    }
  });
});

describe("addresses", () => {
  it("a name resolving to the host's loopback is refused unless the address is listed", async () => {
    setPolicy({ egress: { allow: ["loop.example.test"] } });
    const refused = await connectThrough(proxyAt(), "loop.example.test:443");
    expect(refused.status).toBe(403);
    expect(refused.body).toContain("resolves to 127.0.0.1, an address of the host or a private network");
    expect(lastEvent()).toMatchObject({ name: "loop.example.test", address: "127.0.0.1", allowed: false });
    // Even "allow" does not open the host's own addresses.
    setPolicy({ egress: "allow" });
    expect((await connectThrough(proxyAt(), "loop.example.test:443")).status).toBe(403);
    expect((await connectThrough(proxyAt(), `127.0.0.1:${gate.ports.dns}`)).status).toBe(403);
    expect((await connectThrough(proxyAt(), `${world.hostAddress}:22`)).status).toBe(403);
  });

  it("raw TCP reaches a listed address and port only", async () => {
    setPolicy({ egress: { allow: ["allowed.example.test"] } });
    const unlisted = await connectThrough(proxyAt(), `${world.unlisted}:7000`);
    expect(unlisted.status).toBe(403);
    expect(lastEvent()).toMatchObject({ name: null, address: world.unlisted, port: 7000, allowed: false });
    setPolicy({ egress: { allow: [`${world.unlisted}/32:7000`] } });
    const listed = await connectThrough(proxyAt(), `${world.unlisted}:7000`);
    expect(listed.status).toBe(200);
    const echo = await new Promise<string>((resolve) => {
      listed.socket?.once("data", (d: Buffer) => resolve(d.toString()));
    });
    expect(echo).toBe(`echo ${world.unlisted}\n`);
    listed.socket?.destroy();
    expect((await connectThrough(proxyAt(), `${world.unlisted}:7001`)).status).toBe(403);
  });

  it("every decision is a line of the host's log", async () => {
    setPolicy({ egress: { allow: ["allowed.example.test"] } });
    await connectThrough(proxyAt(), "evil.example.net:443");
    const closed = nextEvent((e) => e.allowed && e.via === "connect");
    await httpsViaProxy(proxyAt(), "allowed.example.test", "/", world.caPem);
    await closed;
    await log.flush();
    const lines = await readFile(join(logDir, "info.log"), "utf8");
    expect(lines).toMatch(
      /Egress refused vm=caged via=connect target=evil\.example\.net:443 name=evil\.example\.net port=443 rule="not in the allow list"/,
    );
    expect(lines).toMatch(
      /Egress allowed vm=caged via=connect target=allowed\.example\.test:443 .*bytesOut=\d+ bytesIn=\d+/,
    );
  });
});

/** A DNS query for the A record of `name`. */
function dnsQuery(name: string): Buffer {
  const labels = name
    .split(".")
    .map((label) => Buffer.concat([Buffer.from([label.length]), Buffer.from(label)]));
  const header = Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
  return Buffer.concat([header, ...labels, Buffer.from([0, 0, 1, 0, 1])]);
}
