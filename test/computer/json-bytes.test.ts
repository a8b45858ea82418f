import { describe, expect, it } from "vitest";
import { parseJsonBytes } from "../../src/computer/http/json-bytes.js";

const long = (n: number, c = "A") => c.repeat(n);
const parse = (text: string) => parseJsonBytes(Buffer.from(text, "utf8"));

describe("parseJsonBytes", () => {
  it("gives what JSON.parse gives, long strings cut out or not", () => {
    const bodies = [
      { command: "write_bytes", params: { path: "/tmp/x", content_b64: long(200_000) } },
      { a: [long(70_000, "x"), "short", { b: long(100_000, "y") }], c: null, d: 1.5, e: true },
      // Escapes and non-ASCII text keep the long string in JSON.parse's hands.
      { text: `${long(70_000)}\\"quoted\\" \n` },
      { text: `${long(70_000)}é` },
      { [long(70_000, "k")]: "a long key stays a key", __proto__: long(70_000, "p") },
      { nested: { deeper: [[[long(65_536, "z")]]] } },
    ];
    for (const body of bodies) {
      const text = JSON.stringify(body);
      expect(parse(text)).toEqual(JSON.parse(text));
    }
  });

  it("keeps a key named __proto__ an own key", () => {
    const value = parse(`{"__proto__": "${long(70_000)}"}`) as Record<string, unknown>;
    expect(Object.getOwnPropertyNames(value)).toEqual(["__proto__"]);
    expect(Object.getOwnPropertyDescriptor(value, "__proto__")?.value).toBe(long(70_000));
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
  });

  it("a string that looks like the stand-in of a cut string is left alone", () => {
    const text = JSON.stringify({ a: long(70_000), b: "\u0000hangar-long-0" });
    expect(parse(text)).toEqual(JSON.parse(text));
  });

  it("fails as JSON.parse does, with its message", () => {
    for (const text of [
      `{"a": "${long(70_000)}"`,
      `{"a": "${long(70_000)}", }`,
      `{"a": "${long(70_000)}`,
      "",
    ]) {
      let expected = "";
      try {
        JSON.parse(text);
      } catch (err) {
        expected = (err as Error).message;
      }
      expect(() => parse(text)).toThrow(expected);
    }
  });
});
