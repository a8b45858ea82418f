import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CpuUse, processTicks } from "./cpu-use.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A /proc of processes with these utime and stime ticks (`stat` as the kernel writes it). */
function fakeProc(processes: Record<number, [number, number]>, name = "sh") {
  const dir = mkdtempSync(join(tmpdir(), "hangar-proc-"));
  dirs.push(dir);
  for (const [pid, [utime, stime]] of Object.entries(processes)) {
    mkdirSync(join(dir, pid));
    const fields = ["S", "1", "1", "1", "0", "-1", "4194304", "0", "0", "0", "0", utime, stime, "0", "0"];
    writeFileSync(join(dir, pid, "stat"), `${pid} (${name}) ${fields.join(" ")}\n`);
  }
  writeFileSync(join(dir, "stat"), "cpu 1 2 3\n"); // not a process
  return dir;
}

describe("processTicks", () => {
  it("reads utime + stime of each process, past a name with spaces and parentheses", () => {
    const dir = fakeProc({ 10: [30, 12], 11: [5, 0] }, "a (b) c");
    expect(processTicks(dir)).toEqual(
      new Map([
        [10, 42],
        [11, 5],
      ]),
    );
  });

  it("leaves this process out", () => {
    const dir = fakeProc({ [process.pid]: [900, 100], 12: [7, 1] });
    expect(processTicks(dir)).toEqual(new Map([[12, 8]]));
  });
});

describe("CpuUse", () => {
  it("gives the ticks used since the last sample in cores; a new process counts whole, a gone one not", () => {
    let ticks = new Map([
      [1, 100],
      [2, 50],
    ]);
    let now = 1000;
    const use = new CpuUse(
      () => ticks,
      () => now,
    );
    expect(use.sample()).toBeUndefined();
    // One second later: pid 1 used 20 ticks, pid 2 ended, pid 3 started and used 30.
    ticks = new Map([
      [1, 120],
      [3, 30],
    ]);
    now += 1000;
    expect(use.sample()).toBeCloseTo(0.5);
    // Two seconds more of nothing.
    now += 2000;
    expect(use.sample()).toBe(0);
  });
});
