import { describe, expect, it } from "vitest";
import { loadOnce } from "./load-once.js";

describe("loadOnce", () => {
  it("loads once for every use, in flight or after, and tries again after a failure", async () => {
    let calls = 0;
    const fail = [true, false];
    const lazy = loadOnce(async () => {
      calls++;
      if (fail.shift()) throw new Error("not yet");
      return calls;
    });
    expect(lazy.current).toBeUndefined();
    await expect(Promise.all([lazy.get(), lazy.get()])).rejects.toThrow("not yet");
    expect(calls).toBe(1);
    expect(lazy.current).toBeUndefined();
    expect(await Promise.all([lazy.get(), lazy.get()])).toEqual([2, 2]);
    expect(await lazy.get()).toBe(2);
    expect(calls).toBe(2);
    expect(await lazy.current).toBe(2);
  });
});
