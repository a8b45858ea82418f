import { describe, expect, it } from "vitest";
import { parseJsonBytes } from "./json-bytes.js";

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

describe("parseJsonBytes with decodeBase64At", () => {
  const underParams = { decodeBase64At: (path: readonly (string | number)[]) => path[0] === "params" };
  const parseDecoding = (body: unknown) =>
    parseJsonBytes(Buffer.from(JSON.stringify(body)), underParams) as {
      params: Record<string, unknown>;
      other?: unknown;
    };
  const bytes = Buffer.alloc(300_001);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919) % 256;

  it("gives a long base64 string there as its bytes, and elsewhere as the string", () => {
    const text = bytes.toString("base64");
    // 300,001 bytes: the text ends in "==", and spans several slices of the decoder.
    expect(text.endsWith("==")).toBe(true);
    const parsed = parseDecoding({ params: { content_b64: text }, other: text });
    expect(Buffer.isBuffer(parsed.params.content_b64)).toBe(true);
    expect((parsed.params.content_b64 as Buffer).equals(bytes)).toBe(true);
    expect(parsed.other).toBe(text);
    for (const size of [300_000, 299_999]) {
      const exact = bytes.subarray(0, size);
      const decoded = parseDecoding({ params: { b: exact.toString("base64") } }).params.b as Buffer;
      expect(decoded.equals(exact)).toBe(true);
    }
  });

  it("keeps as a string what is not canonical standard base64, so nothing is lost or changed", () => {
    const text = bytes.toString("base64");
    const notBytes = [
      `${text.slice(0, -2)}B=`, // padding bits that are not zero: decoding and encoding would change it
      `${text.slice(0, 1000)} ${text.slice(1001)}`, // a space, which Node's decoder would skip
      text.replaceAll("+", "-").replaceAll("/", "_"), // url-safe
      `${text.slice(0, 100_000)}=${text.slice(100_001)}`, // a misplaced "="
      text.slice(1), // a length that is not a multiple of 4
    ];
    for (const value of notBytes) {
      expect(parseDecoding({ params: { content_b64: value } }).params.content_b64).toBe(value);
    }
  });
});
