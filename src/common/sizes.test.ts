import { describe, expect, it } from "vitest";
import { parseBytes, parseLumeSize } from "./sizes.js";

describe("parseLumeSize (lume's size syntax)", () => {
  it("uses binary units and treats a bare number as GB", () => {
    expect(parseLumeSize("8GB")).toBe(8589934592);
    expect(parseLumeSize("512MB")).toBe(536870912);
    expect(parseLumeSize("50GB")).toBe(53687091200);
    expect(parseLumeSize("8")).toBe(8 * 1024 ** 3);
    expect(parseLumeSize(" 1.5gb ")).toBe(1.5 * 1024 ** 3);
    expect(parseLumeSize("2TB")).toBe(2 * 1024 ** 4);
    expect(parseLumeSize("4kb")).toBe(4096);
    expect(parseLumeSize("100b")).toBe(100);
    expect(parseLumeSize("0")).toBe(0);
  });

  it("refuses what lume refuses, naming the input", () => {
    for (const bad of ["8G", "8GiB", "8 gigs", "", "GB", "1e3GB", "abc"]) {
      expect(() => parseLumeSize(bad)).toThrow(`Malformed size input: ${bad}.`);
    }
    expect(() => parseLumeSize("-1GB")).toThrow("Calculated size out of bounds for UInt64: -1GB");
    expect(() => parseLumeSize("99999999999TB")).toThrow("out of bounds");
  });

  it("leaves parseBytes as it was", () => {
    expect(parseBytes("64MiB")).toBe(64 * 1024 ** 2);
    expect(parseBytes("512k")).toBe(512 * 1024);
  });
});
