/**
 * Retries: a loopback proxy in front of the real registry answers 503 and 429, and cuts a blob
 * download in the middle; pushes and pulls still succeed, and a registry that keeps failing gives
 * up with a message that says what it answered.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { pullImage, pushVm } from "../../src/host/images/oci/index.js";
import { startRegistry, type TestRegistry } from "../support/registry.js";
import { makeVmDir } from "../support/vm-dir.js";

const MiB = 1024 * 1024;
let registry: TestRegistry;
let proxy: Server;
let proxyHost: string;
let work: string;
/** Decides, per request, whether to fail it: "503", "429", "cut" (half the body, then reset) or undefined. */
let fault: (method: string, path: string) => "503" | "429" | "cut" | undefined = () => undefined;
const seen: string[] = [];

beforeAll(async () => {
  registry = await startRegistry();
  const target = new URL(registry.url);
  proxy = createServer((req, res) => {
    const what = fault(req.method ?? "", req.url ?? "");
    seen.push(`${what ?? "ok"} ${req.method} ${req.url?.split("?")[0]}`);
    if (what === "503" || what === "429") {
      req.resume();
      res.writeHead(Number(what), what === "429" ? { "retry-after": "0" } : {});
      res.end();
      return;
    }
    const upstream = request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        if (what !== "cut") {
          answer.pipe(res);
          return;
        }
        const half = Number(answer.headers["content-length"] ?? 0) >> 1;
        let sent = 0;
        answer.on("data", (chunk: Buffer) => {
          if (sent >= half) return;
          res.write(chunk.subarray(0, half - sent));
          sent += chunk.length;
          if (sent >= half) res.socket?.destroy();
        });
      },
    );
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  proxyHost = `127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  work = await mkdtemp(join(tmpdir(), "hangar-oci-retry-"));
});

afterAll(async () => {
  proxy?.closeAllConnections();
  await new Promise((resolve) => proxy?.close(resolve));
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

const fast = { baseDelayMs: 10 };

it("retries 5xx, 429 and a download cut short, then succeeds", async () => {
  await makeVmDir(join(work, "src"), {
    diskSize: 4 * MiB,
    writes: [0, 1, 2, 3].map((i) => ({ offset: i * MiB, data: randomBytes(512 * 1024) })),
  });
  const failed = new Set<string>();
  const once = (key: string, kind: "503" | "429" | "cut") => {
    if (failed.has(key)) return undefined;
    failed.add(key);
    return kind;
  };
  fault = (method, path) => {
    if (method === "POST" && path.includes("/blobs/uploads/")) return once("post", "503");
    if (method === "PUT" && path.includes("/manifests/")) return once("manifest", "429");
    return undefined;
  };
  await pushVm({
    vmDir: join(work, "src"),
    imageName: "flaky",
    tags: ["latest"],
    registry: proxyHost,
    organization: "t",
    chunkSizeMb: 1,
    credentials: null,
    retry: fast,
  });
  expect(seen.filter((line) => !line.startsWith("ok"))).toEqual([
    "503 POST /v2/t/flaky/blobs/uploads/",
    "429 PUT /v2/t/flaky/manifests/latest",
  ]);

  let blobGets = 0;
  fault = (method, path) => {
    if (method !== "GET" || !path.includes("/blobs/sha256:")) return undefined;
    blobGets++;
    if (blobGets === 1) return "503";
    if (blobGets === 3) return "cut";
    return undefined;
  };
  const result = await pullImage({
    image: "flaky:latest",
    registry: proxyHost,
    organization: "t",
    destDir: join(work, "pulled"),
    cacheDirectory: join(work, "cache"),
    credentials: null,
    concurrency: 1,
    retry: fast,
  });
  expect(result.downloadedBlobs).toBe(6); // config, nvram, 4 disk parts
  expect(blobGets).toBe(8); // each fault cost one more GET
  const disk = await readFile(join(work, "pulled", "disk.img"));
  expect(disk.equals(await readFile(join(work, "src", "disk.img")))).toBe(true);
});

it("gives up after its attempts with what the registry answered", async () => {
  fault = (method) => (method === "GET" ? "503" : undefined);
  await expect(
    pullImage({
      image: "flaky:latest",
      registry: proxyHost,
      organization: "t",
      destDir: join(work, "never"),
      cacheDirectory: join(work, "cache"),
      credentials: null,
      retry: { ...fast, attempts: 3 },
    }),
  ).rejects.toThrow(`${proxyHost} answered 503 to GET /v2/t/flaky/manifests/latest`);
});

it("a push that keeps failing stops its other pieces, says why and leaves no work files", async () => {
  fault = (method, path) => (method === "POST" && path.includes("/blobs/uploads/") ? "503" : undefined);
  await expect(
    pushVm({
      vmDir: join(work, "src"),
      imageName: "refused",
      tags: ["latest"],
      registry: proxyHost,
      organization: "t",
      chunkSizeMb: 1,
      credentials: null,
      retry: { ...fast, attempts: 2 },
    }),
  ).rejects.toThrow(`${proxyHost} answered 503 to POST /v2/t/refused/blobs/uploads/`);
  expect((await readdir(join(work, "src"))).sort()).toEqual(["config.json", "disk.img", "nvram.bin"]);
});
