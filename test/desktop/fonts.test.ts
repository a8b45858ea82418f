/**
 * The desktop has fonts for what agents type: CJK, Hangul and emoji render as glyphs, not boxes,
 * when fontconfig finds a font covering them (install-deps --runtime installs them).
 */
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const fontsCovering = (codepoint: number) =>
  execFileSync("fc-list", [`:charset=${codepoint.toString(16)}`, "family"], { encoding: "utf8" }).trim();

describe("fonts of the desktop", () => {
  it.each([
    ["中 (Chinese)", 0x4e2d],
    ["あ (Japanese kana)", 0x3042],
    ["한 (Hangul)", 0xd55c],
    ["😀 (emoji)", 0x1f600],
    ["é (Latin)", 0xe9],
  ])("has a font for %s", (_what, codepoint) => {
    expect(fontsCovering(codepoint)).not.toBe("");
  });
});
