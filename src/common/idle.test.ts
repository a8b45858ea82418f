/**
 * The quiet-spell collection (src/common/idle.ts): a full collection only when the heap grew by
 * 16 MiB since the last one, so that a burst's leftovers are given back in the first pause and a
 * quiet server is not collected again and again.
 */
import { getHeapStatistics } from "node:v8";
import { describe, expect, it } from "vitest";
import { collectGarbage, collectGarbageIfGrown } from "./idle.js";

const used = () => getHeapStatistics().used_heap_size;

describe("collectGarbageIfGrown", () => {
  it("collects what a burst left once the heap grew by 16 MiB, and not again until it grows", () => {
    collectGarbage();
    expect(collectGarbageIfGrown()).toBe(false);

    // A burst's leftovers: 32 arrays of 1 MiB of doubles, held, then dropped (garbage of the old
    // generation, which only a full collection frees).
    let burst: number[][] | undefined = Array.from({ length: 32 }, (_, i) =>
      new Array(1 << 17).fill(i + 0.5),
    );
    expect(burst.length).toBe(32);
    const grown = used();
    burst = undefined;

    expect(collectGarbageIfGrown()).toBe(true);
    expect(used()).toBeLessThan(grown - 16 * 1024 * 1024);
    expect(collectGarbageIfGrown()).toBe(false);
  });
});
