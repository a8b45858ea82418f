/** How the nut-js backend turns keys and text into key strokes (no display needed). */
import { Key } from "@nut-tree-fork/shared/dist/lib/enums/key.enum.js";
import { describe, expect, it } from "vitest";
import { NAMED_KEYS } from "../keys.js";
import { strokesForKey, strokesForText } from "./key-strokes.js";

describe("nut-js key strokes", () => {
  it("types shifted symbols and capitals with Shift held around the key of a US layout", () => {
    expect(strokesForText("a!A")).toEqual([
      [Key.A, "down"],
      [Key.A, "up"],
      [Key.LeftShift, "down"],
      [Key.Num1, "down"],
      [Key.Num1, "up"],
      [Key.LeftShift, "up"],
      [Key.LeftShift, "down"],
      [Key.A, "down"],
      [Key.A, "up"],
      [Key.LeftShift, "up"],
    ]);
    expect(strokesForText("\r\n")).toEqual([
      [Key.Enter, "down"],
      [Key.Enter, "up"],
    ]);
  });

  it("has no strokes for text with characters no key types, so that it is pasted whole", () => {
    expect(strokesForText("abc é")).toBeUndefined();
    expect(strokesForText("日本")).toBeUndefined();
    expect(strokesForKey("✓", "down")).toBeUndefined();
  });

  it("presses every canonical named key but pause, which nut-js lacks", () => {
    const missing = NAMED_KEYS.filter((name) => {
      try {
        return strokesForKey(name, "down") === undefined;
      } catch {
        return true;
      }
    });
    expect(missing).toEqual(["pause"]);
    expect(() => strokesForKey("pause", "down")).toThrow(/cannot press pause/);
  });
});
