/**
 * Screenshots that compare only the rows DAMAGE says changed (`RawImage.changedSince`) are never
 * stale: rectangles of random colours are drawn at random places (some of them while a screenshot is
 * being captured, so that a change lands between a capture's damage and its pixels; now and then the
 * whole screen), and once the
 * drawing is done every screenshot — full-size PNG, a downscaled PNG, a full-size JPEG — must equal
 * the same image made from a fresh capture by a connection of its own.
 */
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JPEG_OPTIONS, takeScreenshot } from "../../src/desktop/screenshot.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
import { X11Backend } from "../../src/desktop/x11/backend.js";
import { XConnection } from "../../src/desktop/x11/connection.js";

const WIDTH = 1024;
const HEIGHT = 768;
const SMALL = { width: 800, height: 600 };

/** A small seeded generator, so that a failure can be replayed. */
function random(seed: number) {
  let state = seed >>> 0;
  return (below: number) => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state % below;
  };
}

async function pixels(image: Buffer) {
  return sharp(image).removeAlpha().raw().toBuffer();
}

describe("screenshots from the rows DAMAGE reports changed (X11)", () => {
  let display: VirtualDisplay;
  let painter: XConnection;
  let gc: number;

  beforeAll(async () => {
    display = await startVirtualDisplay({ width: WIDTH, height: HEIGHT });
    painter = await XConnection.open(display.display);
    gc = painter.X.AllocID();
    // Drawn over any window (include inferiors), straight on the root.
    painter.X.CreateGC(gc, painter.root, { foreground: 0x808080, subwindowMode: 1 });
    await painter.sync();
  });
  afterAll(async () => {
    painter?.close();
    await display?.stop();
  });

  it("equal fresh captures' images after many random changes, some drawn during the capture", async () => {
    const kept = await X11Backend.connect(display.display);
    const fresh = async () => {
      const backend = await X11Backend.connect(display.display);
      try {
        return Buffer.from((await backend.capture()).rgb?.() as Buffer);
      } finally {
        await backend.close();
      }
    };
    const next = random(46);
    const draw = (count: number) => {
      for (let i = 0; i < count; i++) {
        painter.X.ChangeGC(gc, { foreground: next(0x1000000) });
        // Now and then the whole screen (a page loaded: the JPEG is then encoded whole).
        if (next(10) === 0) {
          painter.X.PolyFillRectangle(painter.root, gc, [0, 0, WIDTH, HEIGHT]);
          continue;
        }
        // Mostly small (a caret, a line of text), sometimes a row or a band across the screen.
        const height = next(4) === 0 ? 1 + next(300) : 1 + next(24);
        const width = next(4) === 0 ? WIDTH : 1 + next(200);
        painter.X.PolyFillRectangle(painter.root, gc, [next(WIDTH), next(HEIGHT), width, height]);
      }
    };
    const raw = { raw: { width: WIDTH, height: HEIGHT, channels: 3 } } as const;
    /** The backend as the screenshot layer sees it, keeping a copy of each capture's pixels. */
    let captured = Buffer.alloc(0);
    const spy = Object.create(kept) as X11Backend;
    spy.capture = async (region) => {
      const image = await kept.capture(region);
      captured = Buffer.from(image.rgb?.() as Buffer);
      return image;
    };
    /** The image a screenshot of `screen` must decode to, made afresh. */
    const expected = async (screen: Buffer, kind: number) => {
      if (kind === 0) return screen;
      if (kind === 1) {
        return sharp(screen, raw)
          .resize(SMALL.width, SMALL.height, { fit: "fill", kernel: "linear" })
          .raw()
          .toBuffer();
      }
      return pixels(
        await sharp(screen, raw)
          .jpeg({ ...JPEG_OPTIONS, quality: 90 })
          .toBuffer(),
      );
    };
    const check = async (round: number, kind: number, image: Buffer, screen: Buffer, what: string) => {
      const got = await pixels(image);
      const want = await expected(screen, kind);
      if (!got.equals(want)) {
        const at = got.findIndex((value, i) => value !== want[i]);
        const width = kind === 1 ? SMALL.width : WIDTH;
        throw new Error(`round ${round}, kind ${kind}: ${what}, first at row ${Math.floor(at / 3 / width)}`);
      }
      expect(got.length).toBe(want.length);
    };
    try {
      for (let round = 0; round < 60; round++) {
        const kind = round % 3;
        const options =
          kind === 0
            ? ({ format: "png", quality: 80 } as const)
            : kind === 1
              ? ({ format: "png", quality: 80, size: SMALL } as const)
              : ({ format: "jpeg", quality: 90 } as const);
        // Drawn before and while this screenshot is taken: it must show its own capture.
        draw(1 + next(3));
        let racing = true;
        const race = async () => {
          while (racing) {
            draw(1);
            await painter.sync();
          }
        };
        const drawing = race();
        const during = await takeScreenshot(spy, options);
        racing = false;
        await drawing;
        await check(round, kind, during.data, captured, "not the capture it was made from");
        // Drawing done: the next screenshot must show all of it, as a fresh capture does.
        const after = await takeScreenshot(spy, options);
        await check(round, kind, after.data, captured, "not the capture it was made from");
        await check(round, kind, after.data, await fresh(), "stale beside a fresh capture");
      }
    } finally {
      await kept.close();
    }
  }, 120_000);
});
