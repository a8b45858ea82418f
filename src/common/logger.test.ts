/**
 * The logger's destination gathers lines and writes them a quarter second after they were logged,
 * and an idle logger writes nothing: no timer keeps waking the process to flush an empty buffer.
 */

import { once } from "node:events";
import fs, { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, expect, it, vi } from "vitest";
import { createLogger } from "./logger.js";

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

it("writes a line within a quarter second, and nothing while idle", async () => {
  const dir = mkdtempSync(join(tmpdir(), "hangar-logger-"));
  try {
    const file = join(dir, "log");
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
    const writes = vi.spyOn(fs, "write");
    const logger = createLogger({ destination: file });
    const destination = (logger as unknown as Record<symbol, NodeJS.EventEmitter>)[pino.symbols.streamSym];
    await once(destination, "ready");
    logger.info({ n: 1 }, "a line");
    expect(writes).not.toHaveBeenCalled();
    const written = once(destination, "write");
    vi.advanceTimersByTime(250);
    await written;
    expect(JSON.parse(readFileSync(file, "utf8"))).toMatchObject({ msg: "a line", n: 1 });
    const after = writes.mock.calls.length;
    // Ten idle seconds: sonic-boom's own periodic flush wrote an empty buffer 40 times.
    vi.advanceTimersByTime(10_000);
    expect(writes.mock.calls.length).toBe(after);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
