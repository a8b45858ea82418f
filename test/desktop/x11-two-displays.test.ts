/**
 * Two X servers in one process (two displays, or one display whose server restarted): each
 * connection asks its own server with its own atoms. The x11 package shares interned atoms between
 * connections; a window's _NET_WM_PID was then read through another server's atom number.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";

describe("two displays in one process", () => {
  const displays: VirtualDisplay[] = [];
  const managers: DesktopManager[] = [];
  const terminals: ChildProcess[] = [];
  beforeAll(async () => {
    // The accessibility bus launcher interns atoms on the first server before openbox does, so the
    // same names get different numbers on the two servers.
    displays.push(await startVirtualDisplay({ width: 640, height: 480, accessibility: true }));
    displays.push(await startVirtualDisplay({ width: 640, height: 480 }));
    for (const display of displays) {
      managers.push(new DesktopManager({ display: display.display }));
      terminals.push(
        spawn("xterm", ["-T", `on ${display.display}`], {
          env: { ...process.env, ...display.env },
          stdio: "ignore",
        }),
      );
    }
  });
  afterAll(async () => {
    for (const terminal of terminals) terminal.kill();
    for (const manager of managers) await manager.close();
    for (const display of displays) await display.stop();
  });

  it("reads each window's title and pid from its own server", async () => {
    for (const [i, manager] of managers.entries()) {
      const desktop = await manager.provider();
      const windows = await vi.waitFor(
        async () => {
          const list = await desktop.listWindows();
          expect(list).toHaveLength(1);
          return list;
        },
        { timeout: 10_000 },
      );
      expect(windows[0]).toMatchObject({
        title: `on ${displays[i].display}`,
        pid: terminals[i].pid,
        appName: "XTerm",
      });
    }
  });
});
