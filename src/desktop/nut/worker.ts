/**
 * The nut-js worker: a child process of the server that loads nut-js and performs one operation per
 * message. It exists because nut-js kills its process when the display is missing (SIGSEGV) or when
 * the X server goes away (exit 1): here that costs a worker, which the server starts again.
 *
 * Delays are 0, the pointer jumps (no animated moves), and scroll and capture are corrected for
 * nut-js's quirks (see `scroll` and `capture` below).
 */

import { randomUUID } from "node:crypto";
import { bgraToRgba } from "./pixels.js";
import type { WorkerOps, WorkerReply, WorkerRequest } from "./protocol.js";

type Nut = typeof import("@nut-tree-fork/nut-js");
type Handlers = { [K in keyof WorkerOps]: (args: WorkerOps[K][0]) => Promise<WorkerOps[K][1]> };

/**
 * libnut on X11 sends button 6 (left) for a positive horizontal amount and 7 (right) for a negative
 * one, the opposite of what its scrollRight/scrollLeft names say. Windows' HWHEEL is right-positive.
 */
const HORIZONTAL_SCROLL_INVERTED = process.platform === "linux";

function send(reply: WorkerReply) {
  process.send?.(reply);
}

async function main() {
  process.on("disconnect", () => process.exit(0));
  const nut: Nut = await import("@nut-tree-fork/nut-js");
  const { mouse, keyboard, screen, clipboard, providerRegistry } = nut;
  mouse.config.autoDelayMs = 0;
  keyboard.config.autoDelayMs = 0;
  // The config objects only affect nut's own sleeps; the native delays are set here.
  providerRegistry.getMouse().setMouseDelay(0);
  providerRegistry.getKeyboard().setKeyboardDelay(0);
  // Opens the display: if it cannot, libnut crashes this process, and the server reports it.
  await screen.width();

  // Provider calls skip nut's per-call `sleep(autoDelayMs)`, which is a timer turn even at 0 ms.
  const pointer = providerRegistry.getMouse();
  const keys = providerRegistry.getKeyboard();
  const windows = providerRegistry.getWindow();
  // The last capture, to tell the server "unchanged" instead of sending the same pixels again.
  const session = randomUUID();
  let frames = 0;
  let lastFrame: { key: string; id: string; data: Buffer } | null = null;
  const buttons = { left: nut.Button.LEFT, right: nut.Button.RIGHT, middle: nut.Button.MIDDLE };

  const describe = async (handle: number) => {
    const [title, region] = await Promise.all([
      windows.getWindowTitle(handle),
      windows.getWindowRegion(handle),
    ]);
    return {
      handle,
      title,
      bounds: { x: region.left, y: region.top, width: region.width, height: region.height },
    };
  };

  const handlers: Handlers = {
    screenSize: async () => ({ width: await screen.width(), height: await screen.height() }),
    capture: async ({ region, known }) => {
      const image = region
        ? await screen.grabRegion(new nut.Region(region.x, region.y, region.width, region.height))
        : await screen.grab();
      const data = bgraToRgba(image.data, image.width, image.height, image.byteWidth);
      const { width, height } = image;
      const key = region ? `${region.x},${region.y},${width}x${height}` : `screen ${width}x${height}`;
      if (lastFrame && lastFrame.key === key && lastFrame.id === known && lastFrame.data.equals(data)) {
        return { id: lastFrame.id, width, height, data: null };
      }
      lastFrame = { key, id: `${session}-${++frames}`, data };
      return { id: lastFrame.id, width, height, data };
    },
    cursorPosition: async () => {
      const p = await pointer.currentMousePosition();
      return { x: p.x, y: p.y };
    },
    moveCursor: async ({ x, y }) => {
      await pointer.setMousePosition(new nut.Point(x, y));
      return null;
    },
    mouseButton: async ({ button, action }) => {
      if (action === "down") await pointer.pressButton(buttons[button]);
      else await pointer.releaseButton(buttons[button]);
      return null;
    },
    scroll: async ({ dx, dy }) => {
      if (dy > 0) await pointer.scrollUp(dy);
      if (dy < 0) await pointer.scrollDown(-dy);
      const right = HORIZONTAL_SCROLL_INVERTED ? dx < 0 : dx > 0;
      if (dx !== 0) await (right ? pointer.scrollRight(Math.abs(dx)) : pointer.scrollLeft(Math.abs(dx)));
      return null;
    },
    keys: async ({ strokes }) => {
      const held = new Set<number>();
      try {
        for (const [key, action] of strokes) {
          if (action === "down") {
            await keys.pressKey(key);
            held.add(key);
          } else {
            await keys.releaseKey(key);
            held.delete(key);
          }
        }
      } catch (err) {
        // Leave no key of a failed sequence stuck down.
        for (const key of held) await keys.releaseKey(key).catch(() => undefined);
        throw err;
      }
      return null;
    },
    readClipboard: async () => clipboard.getContent(),
    writeClipboard: async ({ text }) => {
      await clipboard.setContent(text);
      return null;
    },
    listWindows: async () => Promise.all((await windows.getWindows()).map(describe)),
    activeWindow: async () => {
      const handle = await windows.getActiveWindow();
      return handle ? describe(handle) : null;
    },
    describeWindow: async ({ handle }) => describe(handle),
    focusWindow: async ({ handle }) => {
      await windows.focusWindow(handle);
      return null;
    },
    moveWindow: async ({ handle, x, y }) => {
      await windows.moveWindow(handle, new nut.Point(x, y));
      return null;
    },
    resizeWindow: async ({ handle, width, height }) => {
      await windows.resizeWindow(handle, new nut.Size(width, height));
      return null;
    },
  };

  process.on("message", async (message: WorkerRequest) => {
    const { id, op, args } = message;
    try {
      const handler = handlers[op] as (a: unknown) => Promise<unknown>;
      if (!handler) throw new Error(`unknown operation ${op}`);
      send({ id, ok: true, value: await handler(args) });
    } catch (err) {
      send({ id, ok: false, error: { message: err instanceof Error ? err.message : String(err) } });
    }
  });
  send({ ready: true, platform: process.platform });
}

main().catch((err) => {
  const missing = (err as NodeJS.ErrnoException)?.code === "ERR_MODULE_NOT_FOUND";
  process.stderr.write(
    missing
      ? "nut-js worker failed to start: @nut-tree-fork/nut-js is not installed here (the desktop container leaves it out; on Linux use the x11 backend)\n"
      : `nut-js worker failed to start: ${err instanceof Error ? err.message : err}\n`,
  );
  process.exit(3);
});
