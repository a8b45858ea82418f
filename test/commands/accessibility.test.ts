import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AccessibleNode } from "../../src/desktop/accessibility.js";
import { atspiProvider } from "../../src/desktop/atspi/index.js";
import { startVirtualDisplay } from "../../src/desktop/virtual-display.js";
import { type A11yApp, startA11yDesktop } from "../support/a11y-app.js";
import { startTestServer } from "../support/server.js";

let desk: Awaited<ReturnType<typeof startA11yDesktop>>;
let app: A11yApp;
let server: Awaited<ReturnType<typeof startA11yDesktop>>["server"];

beforeAll(async () => {
  desk = await startA11yDesktop();
  ({ app, server } = desk);
});
afterAll(() => desk?.stop());

function flatten(node: AccessibleNode): AccessibleNode[] {
  return [node, ...(node.children ?? []).flatMap(flatten)];
}

function inside(inner: { x: number; y: number; width: number; height: number }, outer: typeof inner) {
  return (
    inner.x >= outer.x &&
    inner.y >= outer.y &&
    inner.x + inner.width <= outer.x + outer.width &&
    inner.y + inner.height <= outer.y + outer.height
  );
}

describe("get_accessibility_tree", () => {
  it("shows the GTK window with its entry, label and button, named and placed on the screen", async () => {
    const r = await server.cmd("get_accessibility_tree", { app: "a11y-app" });
    expect(r.event.success).toBe(true);
    const { tree, node_count, truncated } = r.event.content;
    expect(tree.role).toBe("desktop frame");
    expect(truncated).toBe(false);
    expect(tree.children.map((c: AccessibleNode) => c.name)).toEqual(["a11y-app.py"]);

    const nodes = flatten(tree);
    expect(node_count).toBe(nodes.length);
    const frame = nodes.find((n) => n.role === "frame")!;
    const entry = nodes.find((n) => n.role === "text")!;
    const label = nodes.find((n) => n.role === "label")!;
    const button = nodes.find((n) => n.role === "push button")!;
    expect(frame.name).toBe("Hangar A11y Test");
    expect(entry).toMatchObject({ name: "Your name", text: "" });
    expect(entry.states).toEqual(expect.arrayContaining(["editable", "focusable", "showing", "visible"]));
    expect(label.name).toBe("clicks: 0");
    expect(button.name).toBe("Press me");
    expect(button.states).toEqual(expect.arrayContaining(["enabled", "focusable"]));
    expect(button.actions?.map((a) => a.toLowerCase())).toContain("click");

    const screen = { x: 0, y: 0, width: 1280, height: 800 };
    expect(inside(frame.bounds!, screen)).toBe(true);
    for (const widget of [entry, label, button]) {
      expect(widget.bounds!.width).toBeGreaterThan(10);
      expect(inside(widget.bounds!, frame.bounds!)).toBe(true);
    }
    // Laid out top to bottom as packed: entry, label, button.
    expect(entry.bounds!.y).toBeLessThan(label.bounds!.y);
    expect(label.bounds!.y).toBeLessThan(button.bounds!.y);
  });

  it("honours the window filter, the depth limit and the node limit", async () => {
    const none = await server.cmd("get_accessibility_tree", { window: "no such window" });
    expect(flatten(none.event.content.tree).some((n) => n.role === "frame")).toBe(false);

    const shallow = await server.cmd("get_accessibility_tree", { app: "a11y-app", max_depth: 2 });
    const frame = flatten(shallow.event.content.tree).find((n) => n.role === "frame")!;
    expect(frame.name).toBe("Hangar A11y Test");
    expect(frame.children).toBeUndefined();

    const small = await server.cmd("get_accessibility_tree", { max_nodes: 3 });
    expect(small.event.content.truncated).toBe(true);
    expect(small.event.content.node_count).toBeLessThanOrEqual(4);
  });

  it("answers within 300 ms for the test app", async () => {
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      const r = await server.cmd("get_accessibility_tree", { app: "a11y-app" });
      times.push(performance.now() - started);
      expect(r.event.success).toBe(true);
    }
    times.sort((a, b) => a - b);
    expect(times[2]).toBeLessThanOrEqual(300);
  });
});

describe("find_element", () => {
  it("finds the button by role and title, with its bounds", async () => {
    const r = await server.cmd("find_element", { role: "button", title: "Press me" });
    expect(r.event.success).toBe(true);
    expect(r.event.element).toMatchObject({ role: "push button", name: "Press me" });
    expect(r.event.element.bounds.width).toBeGreaterThan(10);
    expect(r.event.element.children).toBeUndefined();
  });

  it("fails with not_found naming what was looked for", async () => {
    const r = await server.cmd("find_element", { role: "button", title: "Launch rockets" });
    expect(r.event).toMatchObject({ success: false, code: "not_found" });
    expect(r.event.error).toBe('No element matches role="button", title="Launch rockets"');
  });

  it("needs something to look for", async () => {
    const r = await server.cmd("find_element", { app: "a11y-app" });
    expect(r.event).toMatchObject({ success: false, code: "invalid_params" });
  });
});

describe("set_element_text and click_element", () => {
  it("replaces the entry's text, Unicode included, as the app sees it", async () => {
    const text = "héllo ✓ 世界";
    const r = await server.cmd("set_element_text", { role: "text", title: "Your name", text });
    expect(r.event).toMatchObject({ success: true, text });
    await app.waitFor(new RegExp(`^entry: ${text}$`));
    const again = await server.cmd("find_element", { role: "text", value: "世界" });
    expect(again.event.element.text).toBe(text);
  });

  it("refuses to set the text of a button", async () => {
    const button = await server.cmd("find_element", { role: "push button", title: "Press me" });
    const r = await server.cmd("set_element_text", { id: button.event.element.id, text: "x" });
    expect(r.event).toMatchObject({ success: false, code: "not_supported" });
  });

  it("clicks the button by its action: the app counts the click and the label changes", async () => {
    const r = await server.cmd("click_element", { title: "Press me" });
    expect(r.event).toMatchObject({ success: true, method: "action", action: "Click" });
    await app.waitFor(/^clicked 1$/);
    const label = await server.cmd("find_element", { role: "label", title: "clicks:" });
    expect(label.event.element.name).toBe("clicks: 1");
  });

  it("clicks with the mouse at the element's centre when asked", async () => {
    const before = app.lines.filter((l) => l.startsWith("clicked ")).length;
    const r = await server.cmd("click_element", { role: "push button", title: "Press me", method: "mouse" });
    expect(r.event).toMatchObject({ success: true, method: "mouse" });
    await app.waitFor(new RegExp(`^clicked ${before + 1}$`));
    const { bounds } = r.event.element;
    const cursor = await server.cmd("get_cursor_position");
    expect(cursor.event.position).toEqual({
      x: Math.round(bounds.x + bounds.width / 2),
      y: Math.round(bounds.y + bounds.height / 2),
    });
  });

  it("tells a malformed id from an element that is gone", async () => {
    const bad = await server.cmd("click_element", { id: "not an id" });
    expect(bad.event).toMatchObject({ success: false, code: "invalid_params" });
    const gone = await server.cmd("click_element", { id: ":1.9999/org/a11y/atspi/accessible/1" });
    expect(gone.event).toMatchObject({ success: false, code: "not_found" });
  });
});

describe("when the desktop restarts", () => {
  it("notices the bus went away and connects to the new one", async () => {
    let current = await startVirtualDisplay({ accessibility: true, windowManager: false });
    const restarting = atspiProvider(() => current.env);
    const local = await startTestServer({ accessibility: restarting });
    try {
      expect((await local.cmd("get_accessibility_tree")).event.success).toBe(true);
      await current.stop();
      current = await startVirtualDisplay({ accessibility: true, windowManager: false });
      const again = await local.cmd("get_accessibility_tree");
      expect(again.event).toMatchObject({ success: true, tree: { role: "desktop frame" } });
    } finally {
      restarting.close();
      await local.close();
      await current.stop();
    }
  });
});

describe("without an accessibility bus", () => {
  it("fails with unavailable saying what is missing, and the server keeps working", async () => {
    const lonely = await startTestServer({ accessibility: atspiProvider({}) });
    try {
      const r = await lonely.cmd("get_accessibility_tree");
      expect(r.event).toMatchObject({ success: false, code: "unavailable" });
      expect(r.event.error).toMatch(/no session D-Bus \(DBUS_SESSION_BUS_ADDRESS is not set\)/);
      const broken = await startTestServer({
        accessibility: atspiProvider({ AT_SPI_BUS_ADDRESS: "unix:path=/nonexistent/hangar-bus" }),
      });
      try {
        const b = await broken.cmd("find_element", { role: "button" });
        expect(b.event).toMatchObject({ success: false, code: "unavailable" });
        expect(b.event.error).toMatch(/Cannot connect to the accessibility bus/);
        expect((await broken.cmd("version")).event.success).toBe(true);
      } finally {
        await broken.close();
      }
    } finally {
      await lonely.close();
    }
  });
});
