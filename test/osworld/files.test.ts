/**
 * The file routes with OSWorld's shapes (`/file` downloads, `/setup/upload`, `/list_directory`,
 * `/desktop_path`, `/setup/download_file`) and what they refuse: uploads past the body limit before
 * they are read, FIFOs, the server's own /proc entry, writes under /proc; hostile file names stay
 * names (no header injection, nothing written elsewhere, no temporary files left).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { homedir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rawRequest } from "../support/raw-http.js";
import { type OsworldDesktop, postJson, startOsworldDesktop } from "./support.js";

const LIMIT = 1024 * 1024;
let desk: OsworldDesktop;
beforeAll(async () => {
  desk = await startOsworldDesktop({}, { bodyLimitBytes: LIMIT });
}, 60_000);
afterAll(() => desk?.stop());

const getFile = (path: string) =>
  fetch(`${desk.base}/file`, { method: "POST", body: new URLSearchParams({ file_path: path }) });

function upload(path: string | undefined, data?: Uint8Array) {
  const form = new FormData();
  if (path !== undefined) form.append("file_path", path);
  if (data) form.append("file_data", new Blob([new Uint8Array(data)]), "ignored-name");
  return fetch(`${desk.base}/setup/upload`, { method: "POST", body: form });
}

describe("/file", () => {
  it("sends a file as an attachment with a type from its extension", async () => {
    const path = join(desk.dir, "notes.txt");
    writeFileSync(path, "héllo\n");
    const res = await getFile(path);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(res.headers.get("content-disposition")).toBe(
      `attachment; filename="notes.txt"; filename*=UTF-8''notes.txt`,
    );
    expect(await res.text()).toBe("héllo\n");
    const binary = join(desk.dir, "data.bin");
    const bytes = Buffer.from(Array.from({ length: 300_000 }, (_, i) => i % 251));
    writeFileSync(binary, bytes);
    const big = await getFile(binary);
    expect(big.headers.get("content-type")).toBe("application/octet-stream");
    expect(Buffer.from(await big.arrayBuffer()).equals(bytes)).toBe(true);
  });

  it("expands ~ and $VARS, answers 404 for what is missing and 400 without file_path", async () => {
    const name = `.hangar-osworld-test-${process.pid}`;
    writeFileSync(join(homedir(), name), "home");
    try {
      expect(await (await getFile(`~/${name}`)).text()).toBe("home");
      expect(await (await getFile(`$HOME/${name}`)).text()).toBe("home");
    } finally {
      execFileSync("rm", ["-f", join(homedir(), name)]);
    }
    const missing = await getFile(join(desk.dir, "nope.txt"));
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: "File not found" });
    const none = await fetch(`${desk.base}/file`, { method: "POST", body: new URLSearchParams({}) });
    expect(none.status).toBe(400);
    expect(await none.json()).toEqual({ error: "file_path is required" });
  });

  it("refuses a FIFO at once, reads /proc files whose size says 0, and never the server's own /proc entry", async () => {
    const fifo = join(desk.dir, "pipe");
    execFileSync("mkfifo", [fifo]);
    const started = Date.now();
    const res = await getFile(fifo);
    expect(res.status).toBe(404);
    expect(Date.now() - started).toBeLessThan(5000);
    const version = await getFile("/proc/version");
    expect(version.status).toBe(200);
    expect(await version.text()).toBe(readFileSync("/proc/version", "utf8"));
    for (const path of ["/proc/self/environ", `/proc/${process.pid}/environ`, "/proc/thread-self/maps"]) {
      const refused = await getFile(path);
      expect(refused.status).toBe(403);
      expect((await refused.json()).error).toMatch(/Not allowed/);
    }
  });

  it("names a hostile file in the header without letting it inject one", async () => {
    const name = 'we"ird\r\nX-Injected: 1 ünï.txt';
    const path = join(desk.dir, name);
    writeFileSync(path, "x");
    const res = await getFile(path);
    expect(res.status).toBe(200);
    expect(res.headers.get("x-injected")).toBeNull();
    const disposition = res.headers.get("content-disposition") ?? "";
    expect(decodeURIComponent(/filename\*=UTF-8''(.+)$/.exec(disposition)?.[1] ?? "")).toBe(name);
  });
});

describe("/setup/upload", () => {
  it("writes the file (making its directories) and answers its size", async () => {
    const path = join(desk.dir, "up", "deep", "a b.xlsx");
    const data = Buffer.from("PK\x03\x04 spreadsheet bytes");
    const res = await upload(path, data);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await res.text()).toBe(`File Uploaded: ${data.length} bytes`);
    expect(readFileSync(path).equals(data)).toBe(true);
    expect(readdirSync(join(desk.dir, "up", "deep"))).toEqual(["a b.xlsx"]);
  });

  it("refuses missing parts (400), paths under /proc (403), and a directory as the target (500, nothing left)", async () => {
    expect((await upload(undefined, Buffer.from("x"))).status).toBe(400);
    const noFile = await upload(join(desk.dir, "x"));
    expect(noFile.status).toBe(400);
    expect(await noFile.json()).toEqual({ error: "file_path and file_data are required" });
    const proc = await upload("/proc/self/attr/current", Buffer.from("x"));
    expect(proc.status).toBe(403);
    mkdirSync(join(desk.dir, "adir"));
    const dir = await upload(join(desk.dir, "adir"), Buffer.from("x"));
    expect(dir.status).toBe(500);
    expect((await dir.json()).error).toMatch(/^Failed to upload file: /);
    expect(readdirSync(desk.dir).filter((n) => n.endsWith(".upload"))).toEqual([]);
  });

  it("refuses an upload past the body limit before reading it, declared or streamed", async () => {
    const big = new Uint8Array(LIMIT + 1000);
    const res = await upload(join(desk.dir, "big.bin"), big);
    expect(res.status).toBe(413);
    expect(existsSync(join(desk.dir, "big.bin"))).toBe(false);
    // Chunked, no Content-Length: refused once the limit is passed.
    const chunks = new ReadableStream({
      start(controller) {
        const boundary = '--b\r\nContent-Disposition: form-data; name="file_data"; filename="x"\r\n\r\n';
        controller.enqueue(new TextEncoder().encode(boundary));
        for (let i = 0; i < 40; i++) controller.enqueue(new Uint8Array(64 * 1024));
        controller.close();
      },
    });
    const streamed = await fetch(`${desk.base}/setup/upload`, {
      method: "POST",
      headers: { "content-type": "multipart/form-data; boundary=b" },
      body: chunks,
      duplex: "half",
    } as RequestInit);
    expect(streamed.status).toBe(413);
  });

  it("keeps a hostile target name a name: written exactly there", async () => {
    // (FormData turns a newline in a field into CRLF, as browsers do: no newline here.)
    const path = join(desk.dir, "evil\tname 'quoted' \"x\"; filename=other ü.txt");
    const res = await upload(path, Buffer.from("ok"));
    expect(res.status).toBe(200);
    expect(readFileSync(path, "utf8")).toBe("ok");
  });
});

describe("/list_directory and /desktop_path", () => {
  it("answers the tree of a directory, without following symbolic links", async () => {
    const root = join(desk.dir, "tree");
    mkdirSync(join(root, "sub"), { recursive: true });
    writeFileSync(join(root, "a.txt"), "");
    writeFileSync(join(root, "sub", "b.txt"), "");
    symlinkSync(root, join(root, "sub", "loop"));
    const res = await postJson(desk.base, "/list_directory", { path: root });
    expect(res.status).toBe(200);
    const { directory_tree: tree } = await res.json();
    const sortTree = (node: any): any =>
      node.children
        ? {
            ...node,
            children: node.children.map(sortTree).sort((a: any, b: any) => a.name.localeCompare(b.name)),
          }
        : node;
    expect(sortTree(tree)).toEqual({
      type: "directory",
      name: "tree",
      children: [
        { type: "file", name: "a.txt" },
        {
          type: "directory",
          name: "sub",
          children: [
            { type: "file", name: "b.txt" },
            { type: "file", name: "loop" },
          ],
        },
      ],
    });
  });

  it("refuses a missing path or one that is not a directory (400)", async () => {
    let res = await postJson(desk.base, "/list_directory", {});
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "Missing 'path' parameter" });
    writeFileSync(join(desk.dir, "plain"), "");
    res = await postJson(desk.base, "/list_directory", { path: join(desk.dir, "plain") });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "The provided path is not a directory" });
  });

  it("/desktop_path answers ~/Desktop when it exists, else 404", async () => {
    const res = await fetch(`${desk.base}/desktop_path`, { method: "POST" });
    if (existsSync(join(homedir(), "Desktop"))) {
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ desktop_path: join(homedir(), "Desktop") });
    } else {
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: "Unsupported operating system or desktop path not found" });
    }
  });
});

describe("/setup/download_file", () => {
  let origin: Server;
  let url: string;
  beforeAll(async () => {
    origin = createServer((req, res) => {
      if (req.url === "/file.bin") res.end(Buffer.from("downloaded bytes"));
      else {
        res.statusCode = 404;
        res.end();
      }
    });
    await new Promise<void>((resolve) => origin.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => origin.close(() => resolve())));

  it("downloads into the path; 400 without url or path; 500 after three failed tries", async () => {
    const path = join(desk.dir, "dl", "file.bin");
    const res = await postJson(desk.base, "/setup/download_file", { url: `${url}/file.bin`, path });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("File downloaded successfully: 16 bytes");
    expect(readFileSync(path, "utf8")).toBe("downloaded bytes");
    expect((await postJson(desk.base, "/setup/download_file", { url })).status).toBe(400);
    const missing = await postJson(desk.base, "/setup/download_file", { url: `${url}/missing`, path });
    expect(missing.status).toBe(500);
    expect(await missing.text()).toMatch(
      /^Failed to download .*\/missing\. No retries left\. Error: HTTP 404/,
    );
  });
});

describe("the browser rules", () => {
  it("refuses a foreign Origin or Host on the controller's routes, and runs nothing for them", async () => {
    const marker = join(desk.dir, "ran-for-a-page");
    const body = JSON.stringify({ command: ["touch", marker], shell: false });
    const port = new URL(desk.base).port;
    const cases: Record<string, string>[] = [
      { origin: "https://evil.example", host: `127.0.0.1:${port}` },
      { host: `evil.example:${port}` },
    ];
    for (const headers of cases) {
      const reply = await rawRequest(
        desk.base,
        "POST",
        "/execute",
        {
          ...headers,
          "content-type": "application/json",
        },
        body,
      );
      expect(reply.status).toBe(403);
      const shot = await rawRequest(desk.base, "GET", "/screenshot", headers);
      expect(shot.status).toBe(403);
    }
    expect(existsSync(marker)).toBe(false);
  });
});
