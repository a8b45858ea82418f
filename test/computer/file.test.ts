import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer } from "../support/server.js";

let server: Awaited<ReturnType<typeof startTestServer>>;
let dir: string;
beforeAll(async () => {
  server = await startTestServer();
  dir = mkdtempSync(join(tmpdir(), "hangar-files-"));
});
afterAll(async () => {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
});

const p = (name: string) => join(dir, name);

describe("file commands", () => {
  it("write_text then read_text round-trips Unicode, and read_text's content is the string itself", async () => {
    const text = "héllo ✓ 日本 🎉\nline two\n";
    expect((await server.cmd("write_text", { path: p("a.txt"), content: text })).event).toEqual({
      success: true,
      content: {},
    });
    expect(readFileSync(p("a.txt"), "utf8")).toBe(text);
    const r = await server.cmd("read_text", { path: p("a.txt") });
    expect(r.event).toEqual({ success: true, content: text });
    expect((await server.cmd("read_file", { path: p("a.txt") })).event.content).toBe(text);
    expect((await server.cmd("write_file", { path: p("b.txt"), content: "b" })).event.success).toBe(true);
  });

  it("a long text that is also base64 is written as that text by write_text, and decoded by write_bytes", async () => {
    // The body reader decodes a long base64 string under params; a command that takes text gets it back.
    const bytes = randomBytes(300_000);
    const text = bytes.toString("base64");
    expect((await server.cmd("write_text", { path: p("b64.txt"), content: text })).event.success).toBe(true);
    expect(readFileSync(p("b64.txt"), "latin1")).toBe(text);
    expect((await server.cmd("write_bytes", { path: p("b64.bin"), content_b64: text })).event.success).toBe(
      true,
    );
    expect(readFileSync(p("b64.bin")).equals(bytes)).toBe(true);
    // Non-zero padding bits: not decoded by the reader, taken by the parameter as before.
    const loose = `${bytes.subarray(0, 299_999).toString("base64").slice(0, -2)}B=`;
    expect(
      (await server.cmd("write_bytes", { path: p("loose.bin"), content_b64: loose })).event.success,
    ).toBe(true);
    expect(readFileSync(p("loose.bin")).equals(Buffer.from(loose, "base64"))).toBe(true);
  });

  it("file_exists and directory_exists tell files from directories", async () => {
    mkdirSync(p("sub"), { recursive: true });
    writeFileSync(p("f"), "x");
    expect((await server.cmd("file_exists", { path: p("f") })).event.exists).toBe(true);
    expect((await server.cmd("file_exists", { path: p("sub") })).event.exists).toBe(false);
    expect((await server.cmd("file_exists", { path: p("none") })).event.exists).toBe(false);
    expect((await server.cmd("directory_exists", { path: p("sub") })).event.exists).toBe(true);
    expect((await server.cmd("directory_exists", { path: p("f") })).event.exists).toBe(false);
  });

  it("expands ~ to the home directory", async () => {
    const r = await server.cmd("directory_exists", { path: "~" });
    expect(r.event.exists).toBe(true);
    const listed = await server.cmd("list_dir", { path: "~" });
    expect(listed.event.files).toEqual(readdirSync(homedir()).sort());
  });

  it("list_dir and ls list entry names", async () => {
    const d = p("listme");
    mkdirSync(join(d, "inner"), { recursive: true });
    writeFileSync(join(d, "z.txt"), "");
    writeFileSync(join(d, "a.txt"), "");
    expect((await server.cmd("list_dir", { path: d })).event.files).toEqual(["a.txt", "inner", "z.txt"]);
    expect((await server.cmd("ls", { path: d })).event.files).toEqual(["a.txt", "inner", "z.txt"]);
  });

  it("large write_bytes bodies, one after another and at once, each land with their own bytes", async () => {
    // Bodies of this size are read into a reused buffer (http/body.ts): none may see another's bytes.
    const chunks = Array.from({ length: 6 }, (_, i) => randomBytes(400_000 + i * 150_000));
    const write = (i: number) =>
      server.cmd("write_bytes", { path: p(`big-${i}.bin`), content_b64: chunks[i].toString("base64") });
    for (const i of [0, 1, 2]) expect((await write(i)).event.success).toBe(true);
    const together = await Promise.all([3, 4, 5].map(write));
    expect(together.map((r) => r.event.success)).toEqual([true, true, true]);
    for (const [i, chunk] of chunks.entries())
      expect(readFileSync(p(`big-${i}.bin`)).equals(chunk)).toBe(true);
  });

  it("read_bytes chunks read at the same time each come back whole", async () => {
    const chunk = 1024 * 1024;
    const data = randomBytes(8 * chunk);
    writeFileSync(p("big.bin"), data);
    // Three rounds: the encodings' buffers are reused once their replies are written, never before.
    for (let round = 0; round < 3; round++) {
      const replies = await Promise.all(
        [...Array(8).keys()].map((i) =>
          server.cmd("read_bytes", { path: p("big.bin"), offset: i * chunk, length: chunk }),
        ),
      );
      replies.forEach((r, i) => {
        const got = Buffer.from(r.event.content_b64, "base64");
        expect(got.equals(data.subarray(i * chunk, (i + 1) * chunk))).toBe(true);
        expect(r.event.content).toEqual({ content_b64: r.event.content_b64 });
      });
    }
    // Larger than one reused buffer, and a seed-shape server: the same bytes.
    const whole = await server.cmd("read_bytes", { path: p("big.bin"), offset: 1, length: 3 * chunk });
    expect(Buffer.from(whole.event.content_b64, "base64").equals(data.subarray(1, 1 + 3 * chunk))).toBe(true);
    const seed = await startTestServer({ spreadResult: false });
    try {
      const r = await seed.cmd("read_bytes", { path: p("big.bin"), offset: chunk, length: 10 });
      expect(r.event).toEqual({
        success: true,
        content: { content_b64: data.subarray(chunk, chunk + 10).toString("base64") },
      });
    } finally {
      await seed.close();
    }
  });

  it("read_bytes reads a range, or to the end when length is null", async () => {
    writeFileSync(p("bytes"), Buffer.from([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]));
    const range = await server.cmd("read_bytes", { path: p("bytes"), offset: 2, length: 3 });
    expect(Buffer.from(range.event.content_b64, "base64")).toEqual(Buffer.from([2, 3, 4]));
    const rest = await server.cmd("read_bytes", { path: p("bytes"), offset: 7, length: null });
    expect(Buffer.from(rest.event.content_b64, "base64")).toEqual(Buffer.from([7, 8, 9]));
    const whole = await server.cmd("read_bytes", { path: p("bytes") });
    expect(Buffer.from(whole.event.content_b64, "base64")).toHaveLength(10);
    const past = await server.cmd("read_bytes", { path: p("bytes"), offset: 100, length: 5 });
    expect(past.event.content_b64).toBe("");
  });

  it("write_bytes overwrites or appends binary data, as clients that chunk files do", async () => {
    const chunk = (n: number) => Buffer.alloc(1024, n).toString("base64");
    await server.cmd("write_bytes", { path: p("chunks"), content_b64: chunk(1) });
    await server.cmd("write_bytes", { path: p("chunks"), content_b64: chunk(2), append: true });
    await server.cmd("write_bytes", { path: p("chunks"), content_b64: chunk(3), append: true });
    const data = readFileSync(p("chunks"));
    expect(data).toHaveLength(3072);
    expect([data[0], data[1024], data[2048]]).toEqual([1, 2, 3]);
    expect((await server.cmd("get_file_size", { path: p("chunks") })).event.size).toBe(3072);
    await server.cmd("write_bytes", { path: p("chunks"), content_b64: chunk(9) });
    expect(statSync(p("chunks")).size).toBe(1024);
  });

  it("rejects data that is not base64 and leaves the file untouched", async () => {
    writeFileSync(p("keep"), "original");
    const r = await server.cmd("write_bytes", { path: p("keep"), content_b64: "not base64!!" });
    expect(r.event).toMatchObject({ success: false, code: "invalid_params" });
    expect(r.event.error).toMatch(/content_b64/);
    expect(readFileSync(p("keep"), "utf8")).toBe("original");
  });

  it("never leaves a half-written file: a failed write keeps the old content and no temp file", async () => {
    mkdirSync(p("target/inner"), { recursive: true });
    writeFileSync(p("target/inner/keep.txt"), "kept");
    // The temp file is written in full, then the rename over a directory fails: nothing may change.
    const intoDir = await server.cmd("write_text", { path: p("target"), content: "x".repeat(100_000) });
    expect(intoDir.event).toMatchObject({ success: false });
    expect(intoDir.event.error).toContain("target");
    expect(readFileSync(p("target/inner/keep.txt"), "utf8")).toBe("kept");
    const noParent = await server.cmd("write_bytes", { path: p("nowhere/f.bin"), content_b64: "AAAA" });
    expect(noParent.event).toMatchObject({ success: false, code: "not_found" });
    expect(readdirSync(dir).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });

  it("create_dir makes parents, delete_dir removes only empty directories, delete_file only files", async () => {
    const deep = p("x/y/z");
    expect((await server.cmd("mkdir", { path: deep })).event.success).toBe(true);
    expect((await server.cmd("create_dir", { path: deep })).event.success).toBe(true);
    expect(statSync(deep).isDirectory()).toBe(true);
    const notEmpty = await server.cmd("delete_dir", { path: p("x") });
    expect(notEmpty.event).toMatchObject({ success: false });
    expect(notEmpty.event.error).toMatch(/not empty/i);
    expect((await server.cmd("rmdir", { path: deep })).event.success).toBe(true);
    const dirAsFile = await server.cmd("delete_file", { path: p("x/y") });
    expect(dirAsFile.event.success).toBe(false);
    writeFileSync(p("gone"), "x");
    expect((await server.cmd("rm", { path: p("gone") })).event.success).toBe(true);
    expect((await server.cmd("file_exists", { path: p("gone") })).event.exists).toBe(false);
  });

  it("names the path when it does not exist or is a directory", async () => {
    for (const command of [
      "read_text",
      "read_bytes",
      "get_file_size",
      "delete_file",
      "list_dir",
      "delete_dir",
    ]) {
      const r = await server.cmd(command, { path: p("missing/thing") });
      expect(r.event).toMatchObject({ success: false, code: "not_found" });
      expect(r.event.error).toContain("missing/thing");
    }
    const isDir = await server.cmd("read_text", { path: dir });
    expect(isDir.event).toMatchObject({ success: false });
    expect(isDir.event.error).toMatch(/directory/i);
  });

  it("validates paths: empty, wrong type, NUL byte", async () => {
    for (const path of ["", 5, null, "a\0b"]) {
      const r = await server.cmd("read_text", { path });
      expect(r.event).toMatchObject({ success: false, code: "invalid_params" });
      expect(r.event.error).toMatch(/path/);
    }
    const negative = await server.cmd("read_bytes", { path: p("bytes"), offset: -1 });
    expect(negative.event.error).toMatch(/offset/);
  });
});
