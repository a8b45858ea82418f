/**
 * The desktop's wallpaper (x11/root-background.ts) on a real Xvfb: the screen shows the gradient
 * row by row, the X server holds a narrow column rather than a picture of the screen, and the column
 * outlives the connection that painted it until the next wallpaper, which frees it.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GRADIENT } from "../../src/desktop/furniture.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
import { X11Backend } from "../../src/desktop/x11/backend.js";
import { XConnection } from "../../src/desktop/x11/connection.js";
import { gradientColumn, paintRootGradient } from "../../src/desktop/x11/root-background.js";

const execFileAsync = promisify(execFile);
const WIDTH = 640;
const HEIGHT = 480;

describe("the wallpaper's gradient on the root window", () => {
  let display: VirtualDisplay;
  beforeAll(async () => {
    // No window manager: nothing but the root window on the screen.
    display = await startVirtualDisplay({ width: WIDTH, height: HEIGHT, windowManager: false });
  });
  afterAll(() => display?.stop());

  /** The pixmap the root window's properties name (_XROOTPMAP_ID), and its size as the X server has it. */
  async function rootPixmap(conn: XConnection) {
    const atom = await conn.atom("_XROOTPMAP_ID");
    const property = await conn.call<{ data: Buffer }>((cb) =>
      conn.X.GetProperty(0, conn.root, atom, 20, 0, 1, cb),
    );
    const pixmap = property.data.readUInt32LE(0);
    return { pixmap, size: await pixmapSize(conn, pixmap) };
  }
  const pixmapSize = (conn: XConnection, pixmap: number) =>
    conn
      .call<{ width: number; height: number }>((cb) => conn.X.GetGeometry(pixmap, cb))
      .then(
        (g) => ({ width: g.width, height: g.height }),
        () => null,
      );

  it("shows the gradient on every row, from a column the X server keeps after the painter leaves", async () => {
    const painter = await XConnection.open(display.display);
    await paintRootGradient(painter, ...GRADIENT);
    painter.close();

    const backend = await X11Backend.connect(display.display);
    const watcher = await XConnection.open(display.display);
    try {
      const rgb = (await backend.capture()).rgb?.() as Buffer;
      const column = gradientColumn(...GRADIENT, HEIGHT, false);
      for (const y of [0, 1, HEIGHT / 2, HEIGHT - 1]) {
        const want = [...column.subarray(y * 4 + 1, y * 4 + 4)];
        for (const x of [0, 7, 8, WIDTH - 1]) {
          const at = (y * WIDTH + x) * 3;
          expect([...rgb.subarray(at, at + 3)], `pixel ${x},${y}`).toEqual(want);
        }
      }
      expect([...rgb.subarray(0, 3)]).toEqual([...GRADIENT[0]]);
      expect([...rgb.subarray(rgb.length - 3)]).toEqual([...GRADIENT[1]]);
      // 8 pixels wide and as tall as the screen: 15 KB of the X server's memory, not 1.2 MB.
      const first = await rootPixmap(watcher);
      expect(first.size).toEqual({ width: 8, height: HEIGHT });

      // Painted again (a restarted server): the earlier column is freed, the new one shown.
      const again = await XConnection.open(display.display);
      await paintRootGradient(again, ...GRADIENT);
      again.close();
      const second = await rootPixmap(watcher);
      expect(second.pixmap).not.toBe(first.pixmap);
      expect(await pixmapSize(watcher, first.pixmap)).toBeNull();

      // Another wallpaper setter (set_wallpaper runs xwallpaper) frees it too, and its picture shows.
      const image = Buffer.from(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC",
        "base64",
      );
      const dir = mkdtempSync(join(tmpdir(), "wallpaper-"));
      try {
        writeFileSync(join(dir, "red.png"), image);
        await execFileAsync("xwallpaper", ["--zoom", join(dir, "red.png")], {
          env: { ...process.env, ...display.env },
        });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      expect(await pixmapSize(watcher, second.pixmap)).toBeNull();
      const fresh = await X11Backend.connect(display.display);
      const after = (await fresh.capture()).rgb?.() as Buffer;
      await fresh.close();
      // Red, darkened by xwallpaper's scaling of one pixel (blended with the outside): no gradient left.
      const [r, g, b] = after.subarray(0, 3);
      expect({ red: r > 40, green: g, blue: b }).toEqual({ red: true, green: 0, blue: 0 });
    } finally {
      watcher.close();
      await backend.close();
    }
  });
});
