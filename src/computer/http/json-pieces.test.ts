/**
 * A reply's JSON in pieces is JSON.stringify's text, with `Bytes` written as base64 wherever they are
 * in plain objects and arrays (an agent's tool result holds its image four levels down).
 */
import { describe, expect, it } from "vitest";
import { Bytes } from "../core/bytes.js";
import { type HeldEncodings, jsonBytes, objectJson, releaseEncodings } from "./json-pieces.js";

const image = Buffer.from(Array.from({ length: 100_000 }, (_, i) => (i * 31) & 255));
const asText = (value: unknown) =>
  JSON.stringify(value, (_key, item) => (item instanceof Bytes ? item.toJSON() : item));

describe("objectJson", () => {
  it("writes Bytes nested in objects and arrays as JSON.stringify would, base64 from the buffer", () => {
    const reply = () => ({
      vocabulary: "anthropic",
      display: { width: 1280, height: 800 },
      tool_result: {
        type: "tool_result",
        tool_use_id: undefined,
        content: [
          { type: "text", text: 'quote " and \\ and é' },
          {
            type: "image",
            source: { type: "base64", media_type: "image/png", data: new Bytes(image, "image/png") },
          },
          undefined,
          () => 1,
        ],
        skipped: undefined,
      },
      openai: { image_url: new Bytes(image.subarray(0, 10), "image/png", { dataUrl: true }) },
      when: new Date(0),
    });
    const expected = asText(reply());
    const held: HeldEncodings = [];
    const pieces = objectJson(reply(), held);
    // The image's base64 is a piece of its own (not copied through a string).
    expect(pieces.length).toBeGreaterThan(1);
    expect(held.length).toBe(2);
    expect(Buffer.concat(pieces).toString("utf8")).toBe(expected);
    releaseEncodings(held);
    expect(JSON.parse(jsonBytes(reply()).toString("utf8")).tool_result.content[1].source.data).toBe(
      image.toString("base64"),
    );
  });

  it("gives one piece for a result without bytes, and leaves bytes deeper than it looks to toJSON", () => {
    const plain = { a: [1, { b: "c" }], d: null };
    expect(objectJson(plain)).toEqual([Buffer.from(JSON.stringify(plain))]);
    const deep = { a: { b: { c: { d: { e: { f: { g: new Bytes(image.subarray(0, 5)) } } } } } } };
    const pieces = objectJson(deep);
    expect(pieces).toHaveLength(1);
    expect(pieces[0].toString()).toBe(asText(deep));
  });
});
