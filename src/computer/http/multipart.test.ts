/** The streaming multipart reader against bodies the platform's own FormData encoder writes. */
import { describe, expect, it } from "vitest";
import { MultipartError, multipartBoundary, readMultipart } from "./multipart.js";

/** A body encoded by undici (as fetch sends a FormData), and its boundary. */
async function encoded(form: FormData): Promise<{ body: Buffer; boundary: string }> {
  const request = new Request("http://x/", { method: "POST", body: form });
  const boundary = multipartBoundary(request.headers.get("content-type") ?? "");
  return { body: Buffer.from(await request.arrayBuffer()), boundary: boundary! };
}

/** Reads `body` delivered in pieces of `size` bytes; the parts' names, file names and contents. */
async function parts(body: Buffer, boundary: string, size: number) {
  async function* pieces() {
    for (let i = 0; i < body.length; i += size) yield body.subarray(i, i + size);
  }
  const found: { name: string; filename?: string; content: string }[] = [];
  await readMultipart(pieces(), boundary, async (part) => {
    const chunks: Buffer[] = [];
    for await (const chunk of part.body) chunks.push(chunk as Buffer);
    found.push({
      name: part.name,
      filename: part.filename,
      content: Buffer.concat(chunks).toString("latin1"),
    });
  });
  return found;
}

describe("readMultipart", () => {
  it("reads every part whatever the pieces the body comes in", async () => {
    const form = new FormData();
    form.append("note", "a field");
    form.append("file", new Blob(["first\r\n--not a boundary\r\n"]), "/tmp/a b.txt");
    form.append("file", new Blob([new Uint8Array([0, 13, 10, 45, 45, 255])]), "dir/b.bin");
    const { body, boundary } = await encoded(form);
    const expected = [
      { name: "note", filename: undefined, content: "a field" },
      { name: "file", filename: "/tmp/a b.txt", content: "first\r\n--not a boundary\r\n" },
      { name: "file", filename: "dir/b.bin", content: "\0\r\n--\xff" },
    ];
    for (const size of [1, 2, 3, 7, 64, body.length]) {
      expect(await parts(body, boundary, size)).toEqual(expected);
    }
  });

  it("refuses a body cut before its closing boundary, and a part without a disposition", async () => {
    const form = new FormData();
    form.append("file", new Blob(["content"]), "x.txt");
    const { body, boundary } = await encoded(form);
    await expect(parts(body.subarray(0, body.length - 10), boundary, 5)).rejects.toThrow(MultipartError);
    const bare = Buffer.from(`--${boundary}\r\ncontent-type: text/plain\r\n\r\nx\r\n--${boundary}--\r\n`);
    await expect(parts(bare, boundary, 4)).rejects.toThrow(/no Content-Disposition/);
  });

  it("finds the boundary of a content type, quoted or not", () => {
    expect(multipartBoundary("multipart/form-data; boundary=abc")).toBe("abc");
    expect(multipartBoundary('multipart/form-data; charset=utf-8; boundary="a b"')).toBe("a b");
    expect(multipartBoundary("application/json")).toBeUndefined();
    expect(multipartBoundary("multipart/form-data")).toBeUndefined();
  });
});
