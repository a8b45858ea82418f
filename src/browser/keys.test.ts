import { describe, expect, it } from "vitest";
import { pageChords, pageKeysOfChord } from "./keys.js";

describe("keys for the page", () => {
  it("reads the desktop's key syntax as Playwright's key names", () => {
    expect(pageChords("Return")).toEqual(["Enter"]);
    expect(pageChords("ctrl+a BackSpace")).toEqual(["Control+a", "Backspace"]);
    expect(pageChords("ctrl+shift+T")).toEqual(["Control+Shift+t"]);
    expect(pageChords("Page_Down Tab esc super+l")).toEqual(["PageDown", "Tab", "Escape", "Meta+l"]);
    expect(pageChords("ctrl++")).toEqual(["Control++"]);
    expect(pageChords("é")).toEqual(["é"]);
    expect(pageKeysOfChord("ctrl+alt")).toEqual(["Control", "Alt"]);
  });

  it("refuses what the page's keyboard does not have, and a sequence where one chord is held", () => {
    expect(() => pageChords("KP_Enter")).toThrow(/the page's keyboard has no key "KP_Enter"/);
    expect(() => pageChords("nosuchkey")).toThrow(/Unknown key/);
    expect(() => pageKeysOfChord("a b")).toThrow(/one key or chord to hold, not 2/);
  });
});
