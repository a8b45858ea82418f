/** A desktop's console log as `hangar vm logs [-n N] [-f]` shows it. */
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { followFile, lastLines } from "./follow-file.js";

const dir = mkdtempSync(join(tmpdir(), "hangar-follow-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function collect(stream: AsyncIterable<Buffer>) {
  let text = "";
  for await (const chunk of stream) text += chunk.toString();
  return text;
}

describe("followFile", () => {
  it("gives the whole file, or its last lines", async () => {
    const file = join(dir, "a.log");
    writeFileSync(file, "one\ntwo\nthree\n");
    const signal = new AbortController().signal;
    expect(await collect(followFile(file, { signal }))).toBe("one\ntwo\nthree\n");
    expect(await collect(followFile(file, { lines: 2, signal }))).toBe("two\nthree\n");
    expect(await collect(followFile(file, { lines: 0, signal }))).toBe("");
    expect(await collect(followFile(join(dir, "missing.log"), { signal }))).toBe("");
  });

  it("follows what is appended, starts over when the file is replaced, and ends on abort", async () => {
    const file = join(dir, "b.log");
    writeFileSync(file, "boot\n");
    const controller = new AbortController();
    const chunks: string[] = [];
    const stream = followFile(file, { lines: 10, follow: true, signal: controller.signal });
    const done = (async () => {
      for await (const chunk of stream) chunks.push(chunk.toString());
    })();
    await expect.poll(() => chunks.join("")).toBe("boot\n");
    appendFileSync(file, "login:\n");
    await expect.poll(() => chunks.join("")).toBe("boot\nlogin:\n");
    writeFileSync(file, "again\n"); // a new run's log, shorter than what was read
    await expect.poll(() => chunks.join("")).toBe("boot\nlogin:\nagain\n");
    controller.abort();
    await done;
  });

  it("counts a last line without its newline", () => {
    expect(lastLines(Buffer.from("a\nb\nc"), 2).toString()).toBe("b\nc");
    expect(lastLines(Buffer.from("a\nb\n"), 5).toString()).toBe("a\nb\n");
  });
});
