/**
 * The effect check's timing against a desktop whose events the test sends: a click redraws where
 * it lands at once and the window manager moves the focus a moment later (with a redraw of its
 * own). The real X desktop is in test/commands/action-effect.test.ts.
 */
import { describe, expect, it } from "vitest";
import type { AccessibilityBackend, AccessibleNode } from "./accessibility.js";
import type { ChangeWatch, DesktopBackend, Rect, WindowInfo } from "./backend.js";
import { beginEffectCheck } from "./effect.js";

class Watch implements ChangeWatch {
  readonly changes: Rect[] = [];
  private readonly waiters = new Set<() => void>();
  add(box: Rect) {
    this.changes.push(box);
    for (const wake of [...this.waiters]) wake();
  }
  until(enough: (changes: readonly Rect[]) => boolean, timeoutMs: number) {
    if (enough(this.changes)) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const check = () => {
        if (!enough(this.changes)) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        resolve(false);
      }, timeoutMs);
      this.waiters.add(check);
    });
  }
  stop() {}
}

const windowNamed = (title: string, y: number): WindowInfo => ({
  id: title,
  title,
  pid: null,
  appName: null,
  bounds: { x: 0, y, width: 300, height: 200 },
  active: true,
  minimized: false,
});

function desktop(watch: Watch) {
  let active = windowNamed("entry", 400);
  const backend = {
    watchChanges: () => watch,
    activeWindow: async () => active,
    cursorPosition: async () => ({ x: 50, y: 50 }),
  } as unknown as DesktopBackend;
  return { backend, focus: (title: string) => (active = windowNamed(title, 0)) };
}

describe("the effect of a click that moves the focus", () => {
  it("reads the focus after the screen is quiet, not at the click's first redraw", async () => {
    const watch = new Watch();
    const desk = desktop(watch);
    const check = await beginEffectCheck(desk.backend, { verify: true, waitMs: 2000 });
    // The click: the button redraws at once; 60 ms later the window manager activates its window.
    watch.add({ x: 40, y: 40, width: 20, height: 20 });
    setTimeout(() => {
      desk.focus("button");
      watch.add({ x: 0, y: 0, width: 300, height: 20 });
    }, 60);
    const { effect, evidence } = await check.finish({ kind: "pointer", points: [{ x: 50, y: 50 }] });
    expect(effect).toBe("confirmed");
    expect(evidence.focus).toEqual({ before: 'window "entry"', after: 'window "button"' });
    // Quiet: 100 ms without a change after the last one, and not the whole wait.
    expect(evidence.waited_ms).toBeGreaterThanOrEqual(150);
    expect(evidence.waited_ms).toBeLessThan(1000);
  });

  it("never waits past verify's time for a screen that keeps changing", async () => {
    const watch = new Watch();
    const desk = desktop(watch);
    const check = await beginEffectCheck(desk.backend, { verify: true, waitMs: 300 });
    const animation = setInterval(() => watch.add({ x: 40, y: 40, width: 20, height: 20 }), 20);
    const report = await check.finish({ kind: "pointer", points: [{ x: 50, y: 50 }] }).finally(() => {
      clearInterval(animation);
    });
    expect(report.effect).toBe("confirmed");
    expect(report.evidence.waited_ms).toBeGreaterThanOrEqual(280);
    expect(report.evidence.waited_ms).toBeLessThan(600);
  });
});

describe("the effect of typing", () => {
  it("finds the typed text that the accessibility tree has a moment after the field redrew", async () => {
    const watch = new Watch();
    const desk = desktop(watch);
    let text = "";
    const a11y = {
      focused: async () => ({ role: "text", name: "field", text }) as unknown as AccessibleNode,
    } as unknown as AccessibilityBackend;
    const check = await beginEffectCheck(desk.backend, {
      verify: true,
      waitMs: 2000,
      accessibility: async () => a11y,
    });
    // The field redraws at once; its text reaches the accessibility tree 50 ms later.
    watch.add({ x: 10, y: 410, width: 100, height: 20 });
    setTimeout(() => {
      text = "hello";
    }, 50);
    const { effect, evidence } = await check.finish({ kind: "keyboard", typed: "hello" });
    expect(effect).toBe("confirmed");
    expect(evidence).toMatchObject({ reason: "the typed text is in the focused element", text: "hello" });
  });
});
