/**
 * Whether pointer and keyboard commands say they worked: `effect` and `evidence` on a real Xvfb +
 * openbox with an accessibility bus, read against what the applications report themselves (a GTK
 * button that appends to a file when clicked, a GTK entry that writes its text to a file).
 */
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  APPS,
  type DesktopServer,
  eventually,
  focusWindow,
  PYTHON,
  placeWindow,
  startDesktopServer,
} from "../support/desktop.js";

let desk: DesktopServer;
/**
 * The clicked button has the focus: its window's title, or the button itself, relabelled by the
 * click, when the window manager has not yet marked its window active (seen under load).
 */
const BUTTON_FOCUSED = /effectbutton|^push button "Pressed \d+"/;
let button: { x: number; y: number; width: number; height: number };
let entryId: number;
const centre = (box: { x: number; y: number; width: number; height: number }) => ({
  x: Math.round(box.x + box.width / 2),
  y: Math.round(box.y + box.height / 2),
});

/** Starts a test app and puts its window at `x, y`; returns its id and client area. */
async function place(app: string, out: string, title: string, x: number, y: number) {
  desk.spawn(PYTHON, [join(APPS, app), join(desk.dir, out), title]);
  const id = await desk.waitForWindow(title);
  return { id, box: await placeWindow(desk, id, x, y) };
}

/**
 * Waits until the screen stops changing (two screenshots 300 ms apart alike): GTK animates a
 * state change (focus, a press) for a while after it, and the next check would see it.
 */
async function stillScreen() {
  let last = "";
  await eventually(async () => {
    const shot = (await desk.cmd("screenshot", { format: "png" })).image_data as string;
    const same = shot === last;
    last = shot;
    if (!same) await sleep(300);
    return same;
  }, 30_000);
}

beforeAll(async () => {
  desk = await startDesktopServer({ width: 1280, height: 800, accessibility: true });
  ({ box: button } = await place("button.py", "clicks.txt", "effectbutton", 100, 100));
  ({ id: entryId } = await place("entry.py", "entry.txt", "effectentry", 100, 400));
}, 60_000);
afterAll(() => desk?.stop());

describe("effect of pointer and keyboard commands", () => {
  it("a click on a button that changes the screen is confirmed, where the button is", async () => {
    const at = centre(button);
    const event = await desk.cmd("left_click", { ...at, verify: true, verify_ms: 5000 });
    expect(event).toMatchObject({ success: true, position: at, effect: "confirmed" });
    expect(await eventually(() => desk.read("clicks.txt"))).toBe("clicked 1\n");
    const { changed } = event.evidence;
    // The change is the button's redraw: around the point clicked.
    expect(changed.x).toBeLessThanOrEqual(at.x);
    expect(changed.x + changed.width).toBeGreaterThan(at.x);
    expect(changed.y).toBeLessThanOrEqual(at.y);
    expect(changed.y + changed.height).toBeGreaterThan(at.y);
    expect(event.evidence.focus.after).toMatch(BUTTON_FOCUSED);
  });

  it("a click on the empty desktop is a suspected no-op, after waiting verify_ms", async () => {
    // The first click there takes the focus from the windows (they redraw); the next changes nothing.
    await desk.cmd("left_click", { x: 1100, y: 700 });
    await stillScreen();
    const event = await desk.cmd("left_click", { x: 1100, y: 700, verify: true, verify_ms: 600 });
    expect(event).toMatchObject({ success: true, effect: "suspected_noop" });
    expect(event.evidence.reason).toMatch(/^nothing on the screen changed within \d+ ms$/);
    expect(event.evidence.waited_ms).toBeGreaterThanOrEqual(590);
    expect(event.evidence.changed).toBeUndefined();
  });

  it("typing into the focused text field is confirmed with the text the field holds", async () => {
    await focusWindow(desk, entryId);
    const event = await desk.cmd("type_text", { text: "effect ✓", verify: true, verify_ms: 5000 });
    expect(event).toMatchObject({ success: true, effect: "confirmed" });
    expect(event.evidence.reason).toBe("the typed text is in the focused element");
    expect(event.evidence.text).toBe("effect ✓");
    expect(event.evidence.focus.after).toMatch(/^text .*in "effectentry"$/);
    expect(await eventually(() => desk.read("entry.txt") === "effect ✓")).toBe(true);
  });

  it("a key that changes nothing in the focused field is a suspected no-op", async () => {
    await focusWindow(desk, entryId);
    await stillScreen();
    const event = await desk.cmd("press_key", { key: "shift", verify: true, verify_ms: 600 });
    expect(event).toMatchObject({ success: true, effect: "suspected_noop" });
    expect(event.evidence.focus.before).toBe(event.evidence.focus.after);
  });

  it("a click that moves the focus to another window is confirmed", async () => {
    await focusWindow(desk, entryId);
    const event = await desk.cmd("left_click", { ...centre(button), verify: true, verify_ms: 5000 });
    expect(event).toMatchObject({ success: true, effect: "confirmed" });
    expect(event.evidence.focus.before).toMatch(/effectentry/);
    expect(event.evidence.focus.after).toMatch(BUTTON_FOCUSED);
  });

  it("without verify the answer comes at once, and a click there says unverifiable rather than guess", async () => {
    await desk.cmd("left_click", { x: 1100, y: 700 });
    await stillScreen();
    const started = performance.now();
    const event = await desk.cmd("left_click", { x: 1100, y: 700 });
    expect(performance.now() - started).toBeLessThan(500);
    expect(event).toMatchObject({ success: true, effect: "unverifiable" });
    expect(event.evidence).toEqual({ reason: "not checked (verify was not asked)", waited_ms: 0 });
    const keys = await desk.cmd("hotkey", { keys: ["shift"] });
    expect(keys).toMatchObject({ success: true, effect: "unverifiable", evidence: { waited_ms: 0 } });
  });

  it("every pointer and keyboard command answers an effect", async () => {
    const calls: [string, Record<string, unknown>][] = [
      ["move_cursor", { x: 1000, y: 700 }],
      ["mouse_down", {}],
      ["mouse_up", {}],
      ["right_click", { x: 1000, y: 700 }],
      ["middle_click", { x: 1000, y: 700 }],
      ["double_click", { x: 1000, y: 700 }],
      ["triple_click", { x: 1000, y: 700 }],
      [
        "drag",
        {
          path: [
            [1000, 700],
            [1010, 710],
          ],
          duration: 0,
        },
      ],
      ["drag_to", { x: 1000, y: 700, duration: 0 }],
      ["scroll", { x: 0, y: 1 }],
      ["scroll_up", {}],
      ["scroll_down", {}],
      ["scroll_direction", { direction: "left" }],
      ["key_down", { key: "shift" }],
      ["key_up", { key: "shift" }],
    ];
    for (const [command, params] of calls) {
      const event = await desk.cmd(command, params);
      expect(event, command).toMatchObject({ success: true });
      expect(["confirmed", "unverifiable", "suspected_noop"], command).toContain(event.effect);
      expect(typeof event.evidence.reason, command).toBe("string");
    }
  });

  it("refuses a verify_ms out of range, naming it", async () => {
    const event = await desk.cmd("left_click", { x: 10, y: 10, verify: true, verify_ms: 60_000 });
    expect(event).toMatchObject({ success: false, code: "invalid_params" });
    expect(event.error).toMatch(/verify_ms/);
  });
});
