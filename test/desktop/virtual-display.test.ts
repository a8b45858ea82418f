import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { startVirtualDisplay } from "../../src/desktop/virtual-display.js";

describe("startVirtualDisplay", () => {
  it("starts Xvfb at the asked size with an EWMH window manager, and stops everything", async () => {
    const desktop = await startVirtualDisplay({ width: 1024, height: 700 });
    try {
      const env = { ...process.env, ...desktop.env };
      expect(execFileSync("xdpyinfo", { env }).toString()).toMatch(/dimensions:\s+1024x700 pixels/);
      expect(execFileSync("wmctrl", ["-m"], { env }).toString()).toMatch(/Openbox/);
    } finally {
      await desktop.stop();
    }
    expect(desktop.xvfb.exitCode !== null || desktop.xvfb.signalCode !== null).toBe(true);
  });

  it("starts two desktops side by side on different displays", async () => {
    const [a, b] = await Promise.all([startVirtualDisplay(), startVirtualDisplay({ windowManager: false })]);
    try {
      expect(a.display).not.toBe(b.display);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});
