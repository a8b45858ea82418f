/**
 * Starts a real OCI registry (the CNCF distribution registry, Debian's `docker-registry`) on a
 * free loopback port with a temporary storage directory; optionally with htpasswd Basic auth.
 * Its access log is kept so that tests can count the requests it served.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { withParentDeathSignal } from "../../src/os/parent-death.js";

export interface TestRegistry {
  /** `127.0.0.1:<port>`, as the pull and push options take it. */
  host: string;
  url: string;
  storageDir: string;
  /** Access-log lines `METHOD path status` seen so far. */
  requests(): { method: string; path: string; status: number }[];
  /** How many blob GETs the registry answered with 200 (optionally for one digest). */
  blobGets(digest?: string): number;
  /** blobGets() once the access log has stopped growing (it is written after each response). */
  settledBlobGets(digest?: string): Promise<number>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface RegistryOptions {
  /** htpasswd Basic auth with this one user. */
  auth?: { username: string; password: string };
  /** Bearer tokens from a token service: JWTs signed by the key of `rootCertBundle`'s certificate. */
  token?: { realm: string; service: string; issuer: string; rootCertBundle: string };
}

export async function startRegistry(options: RegistryOptions = {}) {
  const dir = await mkdtemp(join(tmpdir(), "hangar-registry-"));
  const storageDir = join(dir, "storage");
  const port = await freePort();
  const lines: string[] = [];
  let authBlock = "";
  if (options.auth) {
    const entry = execFileSync("htpasswd", ["-Bbn", options.auth.username, options.auth.password], {
      encoding: "utf8",
    });
    await writeFile(join(dir, "htpasswd"), entry);
    authBlock = `auth:\n  htpasswd:\n    realm: hangar-test\n    path: ${join(dir, "htpasswd")}\n`;
  }
  if (options.token) {
    const t = options.token;
    authBlock = `auth:\n  token:\n    realm: ${t.realm}\n    service: ${t.service}\n    issuer: ${t.issuer}\n    rootcertbundle: ${t.rootCertBundle}\n`;
  }
  await writeFile(
    join(dir, "config.yml"),
    [
      "version: 0.1",
      "log:",
      "  level: error",
      "  accesslog:",
      "    disabled: false",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${storageDir}`,
      "  delete:",
      "    enabled: true",
      "http:",
      `  addr: 127.0.0.1:${port}`,
      "  secret: hangar-test-secret",
      authBlock,
    ].join("\n"),
  );
  const child: ChildProcess = spawn(
    ...withParentDeathSignal("docker-registry", ["serve", join(dir, "config.yml")], "TERM"),
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let buffered = "";
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split("\n");
    buffered = parts.pop() ?? "";
    lines.push(...parts);
  });
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited: ${stderr}`);
    const res = await fetch(`${url}/v2/`).catch(() => undefined);
    if (res && (res.status === 200 || res.status === 401)) break;
    if (Date.now() > deadline) throw new Error(`docker-registry did not start: ${stderr}`);
    await sleep(50);
  }
  const requests = () =>
    lines.flatMap((line) => {
      const m = /"([A-Z]+) (\S+) HTTP\/[\d.]+" (\d{3})/.exec(line);
      return m ? [{ method: m[1], path: m[2], status: Number(m[3]) }] : [];
    });
  const registry: TestRegistry = {
    host: `127.0.0.1:${port}`,
    url,
    storageDir,
    requests,
    blobGets: (digest) =>
      requests().filter(
        (r) =>
          r.method === "GET" &&
          r.status === 200 &&
          /\/blobs\/sha256:/.test(r.path) &&
          (!digest || r.path.endsWith(digest)),
      ).length,
    async settledBlobGets(digest) {
      let count = lines.length;
      for (;;) {
        await sleep(250);
        if (lines.length === count) return registry.blobGets(digest);
        count = lines.length;
      }
    },
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        await Promise.race([exited, sleep(3000)]);
        if (child.exitCode === null) child.kill("SIGKILL");
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
  return registry;
}

/** The path of a blob's data file inside the registry's storage. */
export function blobDataPath(storageDir: string, digest: string): string {
  const hex = digest.replace("sha256:", "");
  return join(storageDir, "docker/registry/v2/blobs/sha256", hex.slice(0, 2), hex, "data");
}
