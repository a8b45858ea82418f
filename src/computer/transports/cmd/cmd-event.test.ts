/**
 * The `/cmd` event is written in pieces (a result's bytes are serialized once, base64 fields go out
 * as their encoded bytes without a JSON string copy): whatever the pieces, the event must be exactly the JSON of
 * the spec's envelope.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Bytes } from "../../core/bytes.js";
import { cuaReply, type Outcome } from "../../core/outcome.js";
import { jsonBytes } from "../../http/json-pieces.js";
import { cmdEnvelope, cmdEventBytes, cmdEventText, eventLength } from "./cmd-event.js";

const bytes = randomBytes(3000);
const asText = (outcome: Outcome, spread: boolean) => {
  const pieces = cmdEventBytes(outcome, spread);
  const text = Buffer.concat(pieces).toString("utf8");
  expect(Buffer.byteLength(text)).toBe(eventLength(pieces));
  return text;
};

describe("the /cmd event and the /ws reply", () => {
  const results: Record<string, unknown> = {
    "a base64 field alone": { content_b64: new Bytes(bytes) },
    "fields around it, an undefined one skipped": {
      name: "ünï ✓",
      content_b64: new Bytes(bytes),
      missing: undefined,
      nested: { list: [1, null, "x"] },
    },
    "two base64 fields": { a: new Bytes(bytes.subarray(0, 5)), b: new Bytes(Buffer.alloc(0)) },
    "a data URL and bytes in a list": {
      image_url: new Bytes(bytes, "image/png", { dataUrl: true }),
      list: [new Bytes(bytes.subarray(0, 7))],
    },
    "an agent's tool result, its image nested": {
      vocabulary: "anthropic",
      tool_result: { content: [{ type: "image", source: { data: new Bytes(bytes, "image/png") } }] },
    },
    "no bytes at all": { stdout: "hi\n", return_code: 0 },
    "an empty object": {},
    "a string": "just text",
    "a result that has its own content field": { content: "x", size: 3 },
  };
  for (const [name, result] of Object.entries(results)) {
    for (const spread of [true, false]) {
      it(`is the envelope's JSON for ${name} (spread ${spread ? "on" : "off"})`, () => {
        const outcome: Outcome = { success: true, result };
        const expected = `data: ${JSON.stringify(cmdEnvelope(outcome, spread))}\n\n`;
        expect(asText(outcome, spread)).toBe(expected);
      });
    }
  }

  for (const [name, result] of Object.entries(results)) {
    for (const spread of [true, false]) {
      it(`is the envelope's JSON as one text, or none where bytes need pieces, for ${name} (spread ${spread ? "on" : "off"})`, () => {
        const outcome: Outcome = { success: true, result };
        const text = cmdEventText(outcome, spread);
        const holds = (value: unknown): boolean =>
          value instanceof Bytes ||
          (typeof value === "object" && value !== null && Object.values(value).some(holds));
        if (holds(result)) expect(text).toBeUndefined();
        else expect(text).toBe(`data: ${JSON.stringify(cmdEnvelope(outcome, spread))}\n\n`);
      });
    }
  }

  it("is a failure's envelope as one text", () => {
    const error = "Command did not finish within 1 s";
    const outcome: Outcome = { success: false, code: "timeout", error, fields: {} };
    expect(cmdEventText(outcome, true)).toBe(`data: ${JSON.stringify(cmdEnvelope(outcome, true))}\n\n`);
    expect(JSON.parse((cmdEventText(outcome, true) ?? "").slice(6))).toMatchObject({
      success: false,
      error: outcome.error,
    });
  });

  for (const [name, result] of Object.entries(results)) {
    it(`is the JSON of the /ws reply for ${name}`, () => {
      const reply = cuaReply({ success: true, result });
      expect(jsonBytes(reply).toString("utf8")).toBe(JSON.stringify(reply));
    });
  }

  it("carries base64 that decodes to the original bytes, in content and beside it", () => {
    const event = JSON.parse(
      asText({ success: true, result: { content_b64: new Bytes(bytes) } }, true).slice(6),
    );
    expect(Buffer.from(event.content_b64, "base64").equals(bytes)).toBe(true);
    expect(event.content.content_b64).toBe(event.content_b64);
  });
});
