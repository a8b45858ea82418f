/**
 * `GET`/`PUT /files/<path>`: raw bytes both ways over real HTTP, byte ranges, atomic replacement,
 * the body limit while the body streams, clear failures, and the same auth as `/cmd`.
 */
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type RunningComputerServer, startComputerServer } from "../../src/computer/server.js";

const LIMIT = 1024 * 1024;
let server: RunningComputerServer;
let dir: string;
beforeAll(async () => {
  server = await startComputerServer({ port: 0, bodyLimitBytes: LIMIT });
  dir = mkdtempSync(join(tmpdir(), "hangar-files-http-"));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const fileUrl = (path: string, base = server.url) =>
  `${base}/files${path.split("/").map(encodeURIComponent).join("/")}`;

describe("GET and PUT /files/<path>", () => {
  it("uploads a new file (201), replaces it (200, mode kept) and downloads it byte for byte", async () => {
    const path = join(dir, "name with spaces é.bin");
    const first = randomBytes(300_000);
    let res = await fetch(fileUrl(path), { method: "PUT", body: first });
    expect(res.status).toBe(201);
    expect(await res.json()).toEqual({ success: true, size: first.length });
    chmodSync(path, 0o600);

    const second = randomBytes(700_000);
    res = await fetch(fileUrl(path), { method: "PUT", body: second });
    expect(res.status).toBe(200);
    expect(readFileSync(path).equals(second)).toBe(true);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(readdirSync(dir).filter((name) => name.endsWith(".tmp"))).toEqual([]);

    res = await fetch(fileUrl(path));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/octet-stream");
    expect(res.headers.get("accept-ranges")).toBe("bytes");
    expect(Buffer.from(await res.arrayBuffer()).equals(second)).toBe(true);
  });

  it("serves byte ranges with 206 and Content-Range, and 416 past the end", async () => {
    const path = join(dir, "ranges.bin");
    const data = randomBytes(10_000);
    writeFileSync(path, data);
    const get = (range: string) => fetch(fileUrl(path), { headers: { range } });
    for (const [range, start, end] of [
      ["bytes=100-199", 100, 199],
      ["bytes=9990-", 9990, 9999],
      ["bytes=-25", 9975, 9999],
      ["bytes=9000-20000", 9000, 9999],
    ] as const) {
      const res = await get(range);
      expect(res.status).toBe(206);
      expect(res.headers.get("content-range")).toBe(`bytes ${start}-${end}/10000`);
      expect(Buffer.from(await res.arrayBuffer()).equals(data.subarray(start, end + 1))).toBe(true);
    }
    const past = await get("bytes=10000-");
    expect(past.status).toBe(416);
    expect(past.headers.get("content-range")).toBe("bytes */10000");
    // Several ranges: the whole file, as RFC 9110 allows.
    const several = await get("bytes=0-1,5-6");
    expect(several.status).toBe(200);
    expect((await several.arrayBuffer()).byteLength).toBe(10_000);

    const head = await fetch(fileUrl(path), { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe("10000");
  });

  it("survives a client that leaves mid-download, and serves the next one whole", async () => {
    const path = join(dir, "large.bin");
    const data = randomBytes(16 * 1024 * 1024);
    writeFileSync(path, data);
    const leaving = new AbortController();
    const res = await fetch(fileUrl(path), { signal: leaving.signal });
    const reader = res.body?.getReader();
    expect((await reader?.read())?.value?.length).toBeGreaterThan(0);
    leaving.abort();
    const again = await fetch(fileUrl(path));
    expect(Buffer.from(await again.arrayBuffer()).equals(data)).toBe(true);
  });

  it("~ is the home directory, and an empty file is served empty", async () => {
    const path = join(dir, "empty");
    writeFileSync(path, "");
    const res = await fetch(fileUrl(path));
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("");
    const home = await fetch(`${server.url}/files/~/.hangar-no-such-file-${process.pid}`);
    expect(home.status).toBe(404);
    expect((await home.json()).detail).toMatch(/^No such file or directory: ~\/\.hangar-no-such-file/);
  });

  it("fails clearly: missing file, directory, NUL byte, bad encoding, missing parent", async () => {
    const cases: [string, RequestInit, number, RegExp][] = [
      [fileUrl(join(dir, "none")), {}, 404, /No such file or directory/],
      [fileUrl(dir), {}, 400, /Not a regular file/],
      [`${server.url}/files/tmp/a%00b`, {}, 400, /NUL byte/],
      [`${server.url}/files/tmp/%E0%A4%A`, {}, 400, /percent-encoding/],
      [`${server.url}/files/`, {}, 400, /give a file's path/],
      [fileUrl(join(dir, "no-dir", "x")), { method: "PUT", body: "x" }, 404, /No such file or directory/],
      [fileUrl(dir), { method: "PUT", body: "x" }, 400, /Is a directory/],
    ];
    for (const [url, init, status, detail] of cases) {
      const res = await fetch(url, init);
      expect(res.status, url).toBe(status);
      expect((await res.json()).detail, url).toMatch(detail);
    }
  });

  it("refuses a body over the limit, declared or streamed, and leaves the old file as it was", async () => {
    const path = join(dir, "kept.txt");
    writeFileSync(path, "old content");
    const declared = await fetch(fileUrl(path), { method: "PUT", body: Buffer.alloc(LIMIT + 1) });
    expect(declared.status).toBe(413);
    expect((await declared.json()).detail).toMatch(/limit is 1 MiB/);

    // Chunked, no Content-Length: the limit applies as the bytes arrive.
    const streamed = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(fileUrl(path), { method: "PUT" }, (res) => {
        let body = "";
        res.on("data", (chunk) => {
          body += chunk;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        res.on("error", reject);
      });
      req.on("error", reject);
      const chunk = Buffer.alloc(256 * 1024, 1);
      let sent = 0;
      const pump = () => {
        while (sent < 8 && req.write(chunk)) sent++;
        if (sent < 8) req.once("drain", pump);
        else req.end();
      };
      pump();
    });
    expect(streamed.status).toBe(413);
    expect(JSON.parse(streamed.body).detail).toMatch(/limit is 1 MiB/);
    expect(readFileSync(path, "utf8")).toBe("old content");
    expect(readdirSync(dir).filter((name) => name.endsWith(".tmp"))).toEqual([]);
  });
});

describe("large uploads", () => {
  const SIZE = 72 * 1024 * 1024;
  let big: RunningComputerServer;
  beforeAll(async () => {
    big = await startComputerServer({ port: 0, bodyLimitBytes: 2 * SIZE });
  });
  afterAll(() => big.close());

  /** Sends `data` with PUT; after `leaveAfter` bytes (if given) the client goes away instead. */
  function put(path: string, data: Buffer, leaveAfter?: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = request(
        fileUrl(path, big.url),
        { method: "PUT", headers: { "content-length": data.length } },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        },
      );
      req.on("error", (err) => (leaveAfter === undefined ? reject(err) : resolve(0)));
      if (leaveAfter !== undefined) req.on("close", () => resolve(0));
      const step = 1024 * 1024;
      let sent = 0;
      const pump = () => {
        while (sent < data.length) {
          if (leaveAfter !== undefined && sent >= leaveAfter) return void req.destroy();
          const more = req.write(data.subarray(sent, sent + step));
          sent += step;
          if (!more) return void req.once("drain", pump);
        }
        req.end();
      };
      pump();
    });
  }

  it("arrive byte for byte, and one cut short leaves the old file and no temporary file", async () => {
    const path = join(dir, "big.bin");
    const data = randomBytes(SIZE);
    expect(await put(path, data)).toBe(201);
    expect(readFileSync(path).equals(data)).toBe(true);

    // Cut in the middle: the old file stays whole and the temporary file goes.
    expect(await put(path, randomBytes(SIZE), 48 * 1024 * 1024)).toBe(0);
    await vi.waitFor(() => expect(readdirSync(dir).filter((name) => name.endsWith(".tmp"))).toEqual([]), {
      timeout: 10_000,
    });
    expect(readFileSync(path).equals(data)).toBe(true);

    const next = randomBytes(SIZE);
    expect(await put(path, next)).toBe(200);
    expect(readFileSync(path).equals(next)).toBe(true);
  });
});

describe("/files in cloud mode", () => {
  it("needs the same container name and API key as /cmd", async () => {
    const cloud = await startComputerServer({
      port: 0,
      cloud: { containerName: "vm-files", keys: ["sk-files-test-1"], limiter: false },
    });
    try {
      const path = join(dir, "secret.txt");
      mkdirSync(dir, { recursive: true });
      writeFileSync(path, "secret");
      const anonymous = await fetch(fileUrl(path, cloud.url));
      expect(anonymous.status).toBeGreaterThanOrEqual(401);
      expect(anonymous.status).toBeLessThanOrEqual(403);
      expect(await anonymous.text()).not.toContain('secret"');
      const put = await fetch(fileUrl(path, cloud.url), { method: "PUT", body: "changed" });
      expect([401, 403]).toContain(put.status);
      expect(readFileSync(path, "utf8")).toBe("secret");

      const headers = { "X-Container-Name": "vm-files", "X-API-Key": "sk-files-test-1" };
      const allowed = await fetch(fileUrl(path, cloud.url), { headers });
      expect(allowed.status).toBe(200);
      expect(await allowed.text()).toBe("secret");
    } finally {
      await cloud.close();
    }
  });
});
