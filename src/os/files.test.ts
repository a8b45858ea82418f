/**
 * `writeStreamed` closes the temporary file's descriptor once, whatever happens to the source: a
 * second close of the same number would cut whatever the number had been given to meanwhile
 * (another upload's socket, a file being written).
 */
import fs, { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterEach, expect, it, vi } from "vitest";
import { type FileSystem, localFileSystem, type OpenFile } from "../common/file-system.js";
import { writeStreamed } from "./files.js";

const dirs: string[] = [];
afterEach(() => {
  vi.restoreAllMocks();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/**
 * The local file system, with what each opened file's `close` answered; `descriptors` gets each
 * opened file's number.
 */
function watchedFiles(closes: string[], descriptors: number[] = []): FileSystem {
  return {
    ...localFileSystem,
    open: async (path, flags, mode) => {
      const handle = await localFileSystem.open(path, flags, mode);
      descriptors.push((handle as unknown as { fd: number }).fd);
      return new Proxy(handle, {
        get(target, key) {
          if (key === "close")
            return () =>
              target.close().then(
                () => closes.push("closed"),
                (err: NodeJS.ErrnoException) => {
                  closes.push(err.code ?? err.message);
                  throw err;
                },
              );
          const value = Reflect.get(target, key);
          return typeof value === "function" ? value.bind(target) : value;
        },
      }) as OpenFile;
    },
  };
}

it("closes the temporary file once when the source fails mid-way, and leaves the target as it was", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hangar-files-"));
  dirs.push(dir);
  const target = join(dir, "kept.bin");
  await writeStreamed(target, Readable.from([Buffer.from("old")]));
  const closes: string[] = [];
  const descriptors: number[] = [];
  // What closes a descriptor by its number (a write stream does, through fs.close).
  const closeByNumber = vi.spyOn(fs, "close");
  let sent = 0;
  const failing = new Readable({
    read() {
      sent++;
      if (sent > 3) this.destroy(new Error("the client went away"));
      else this.push(Buffer.alloc(256 * 1024, sent));
    },
  });
  await expect(writeStreamed(target, failing, watchedFiles(closes, descriptors))).rejects.toThrow(
    "the client went away",
  );
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(descriptors).toHaveLength(1);
  // Closed by its handle alone, once.
  expect(closeByNumber.mock.calls.filter(([fd]) => fd === descriptors[0])).toEqual([]);
  expect(closes).toEqual(["closed"]);
  expect(readFileSync(target, "utf8")).toBe("old");
  expect(readdirSync(dir)).toEqual(["kept.bin"]);
});

it("closes it once when the source ends, and the target is the new data", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hangar-files-"));
  dirs.push(dir);
  const target = join(dir, "new.bin");
  const closes: string[] = [];
  expect(
    await writeStreamed(
      target,
      Readable.from([Buffer.from("abc"), Buffer.from("def")]),
      watchedFiles(closes),
    ),
  ).toBe(6);
  expect(closes).toEqual(["closed"]);
  expect(readFileSync(target, "utf8")).toBe("abcdef");
});
