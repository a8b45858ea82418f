/**
 * A "world" for the egress tests: a network namespace this test makes (`ip netns add`, a veth pair
 * to the host), on a /24 of 198.18.0.0/15 (the benchmarking range, never routed outside), holding
 * an HTTPS and HTTP server per name, a TCP echo, and the DNS server that answers those names
 * (world-server.ts). Nothing here reaches any outside address. `cleanup()` ends the servers and
 * deletes the namespace (and with it the veth pair).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ensureCa, ensureLeaf } from "../../src/host/egress/certificates.js";

const run = promisify(execFile);

export interface World {
  /** The world's DNS server (UDP and TCP 53), for `egressResolvers`. */
  dns: string;
  /** The host's own address on the world's link. */
  hostAddress: string;
  /** The address a name answers with. */
  addressOf(name: string): string;
  /** An address in the world that no name answers with (its echo on 7000 answers all the same). */
  unlisted: string;
  /** The world's CA certificate (PEM), which its HTTPS servers' certificates are signed by. */
  caPem: string;
  caFile: string;
  cleanup(): Promise<void>;
}

/**
 * Starts the world: each name gets its own address (198.18.N.10, .11, …) unless `fixed` gives it
 * one (e.g. `loop.example.test` → 127.0.0.1, a name pointing at the host's loopback).
 */
export async function startWorld(names: string[], fixed: Record<string, string> = {}): Promise<World> {
  const id = randomBytes(3).toString("hex");
  const ns = `hgw-${id}`;
  const hostIf = `hgw${id}h`;
  const worldIf = `hgw${id}w`;
  const subnet = await freeSubnet();
  const hostAddress = `${subnet}.1`;
  const dns = `${subnet}.2`;
  const unlisted = `${subnet}.250`;
  const dir = mkdtempSync(join(tmpdir(), "hangar-world-"));
  const assigned: Record<string, string> = {};
  names.forEach((name, i) => {
    assigned[name] = fixed[name] ?? `${subnet}.${10 + i}`;
  });
  for (const [name, address] of Object.entries(fixed)) assigned[name] = address;
  let server: ChildProcess | undefined;
  const cleanup = async () => {
    if (server?.pid && server.exitCode === null) {
      const exited = new Promise((resolve) => server?.once("exit", resolve));
      process.kill(-server.pid, "SIGKILL");
      await exited;
    }
    await run("ip", ["netns", "del", ns]).catch(() => undefined);
    await run("ip", ["link", "del", hostIf]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const ip = (...args: string[]) => run("ip", args);
    const inWorld = (...args: string[]) => run("ip", ["netns", "exec", ns, "ip", ...args]);
    await ip("netns", "add", ns);
    await ip("link", "add", hostIf, "type", "veth", "peer", "name", worldIf, "netns", ns);
    await ip("addr", "add", `${hostAddress}/24`, "dev", hostIf);
    await ip("link", "set", hostIf, "up");
    await inWorld("link", "set", "lo", "up");
    await inWorld("link", "set", worldIf, "up");
    const addresses = new Set([
      dns,
      unlisted,
      ...Object.values(assigned).filter((a) => a.startsWith(subnet)),
    ]);
    for (const address of addresses) await inWorld("addr", "add", `${address}/24`, "dev", worldIf);
    await inWorld("route", "add", "default", "via", hostAddress);

    const ca = await ensureCa(join(dir, "ca"), "Hangar test world CA");
    for (const name of Object.keys(assigned)) await ensureLeaf(ca, dir, name);
    // The unlisted address answers too (TLS with a certificate for it, the echo), so that what
    // stops a connection to it is the cage alone.
    await ensureLeaf(ca, dir, "unlisted.invalid");
    const config = join(dir, "world.json");
    writeFileSync(
      config,
      JSON.stringify({ dns, names: { ...assigned, "unlisted.invalid": unlisted }, certDir: dir }),
    );
    server = spawn(
      "ip",
      [
        "netns",
        "exec",
        ns,
        process.execPath,
        "--import",
        "tsx",
        join(import.meta.dirname, "world-server.ts"),
        config,
      ],
      { stdio: ["ignore", "pipe", "pipe"], detached: true },
    );
    await new Promise<void>((resolve, reject) => {
      let err = "";
      server?.stderr?.on("data", (d) => {
        err += d;
      });
      server?.stdout?.on("data", (d: Buffer) => {
        if (d.toString().includes("ready")) resolve();
      });
      server?.once("exit", (code) => reject(new Error(`the world's servers exited (${code}): ${err}`)));
      setTimeout(() => reject(new Error(`the world's servers did not start: ${err}`)), 60_000).unref();
    });
    const caPem = await readFile(ca.cert, "utf8");
    return {
      dns,
      hostAddress,
      unlisted,
      addressOf: (name) => {
        const address = assigned[name];
        if (!address) throw new Error(`the world has no name ${name}`);
        return address;
      },
      caPem,
      caFile: ca.cert,
      cleanup,
    };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/** A 198.18.N.0/24 that no route of the host uses yet. */
async function freeSubnet(): Promise<string> {
  const routes = (await run("ip", ["-4", "route", "show"])).stdout;
  for (;;) {
    const subnet = `198.18.${randomInt(1, 255)}`;
    if (!routes.includes(`${subnet}.`)) return subnet;
  }
}
