/** The one mapping of a CommandError to an HTTP status, and the Range parser the file downloads share. */
import { describe, expect, it } from "vitest";
import { CommandError, describeOsError } from "../../common/errors.js";
import { httpStatusOf } from "./failure-status.js";
import { parseRange } from "./range.js";

const osError = (code: string) => Object.assign(new Error(code), { code });

describe("a CommandError's HTTP status", () => {
  it("comes from the OS error behind it first, then from its code", () => {
    expect(httpStatusOf(describeOsError(osError("ENOENT"), "/x"))).toBe(404);
    expect(httpStatusOf(describeOsError(osError("EACCES"), "/x"))).toBe(403);
    expect(httpStatusOf(describeOsError(osError("ENOSPC"), "/x"))).toBe(507);
    expect(httpStatusOf(describeOsError(osError("EISDIR"), "/x"))).toBe(400);
    expect(httpStatusOf(describeOsError(osError("EMFILE"), "/x"))).toBe(500);
    expect(httpStatusOf(new CommandError("invalid_params", "bad"))).toBe(400);
    expect(httpStatusOf(new CommandError("too_large", "big"))).toBe(413);
    expect(httpStatusOf(new CommandError("failed", "no"))).toBe(500);
  });

  it("keeps the OS error out of what is sent", () => {
    const failure = describeOsError(osError("ENOENT"), "/x");
    expect(failure.message).toBe("No such file or directory: /x");
    expect(JSON.stringify({ ...failure.fields })).toBe("{}");
    expect(Object.keys(failure)).not.toContain("cause");
  });
});

describe("a Range header", () => {
  it("is one range, the whole file, or out_of_range with the file's size", () => {
    expect(parseRange("bytes=2-5", 10)).toEqual({ start: 2, end: 5 });
    expect(parseRange("bytes=-3", 10)).toEqual({ start: 7, end: 9 });
    expect(parseRange("bytes=0-1,4-5", 10)).toBeUndefined();
    let thrown: unknown;
    try {
      parseRange("bytes=10-", 10);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(CommandError);
    expect((thrown as CommandError).code).toBe("out_of_range");
    expect(httpStatusOf(thrown as CommandError)).toBe(416);
    expect((thrown as CommandError).fields).toEqual({ size: 10 });
  });
});
