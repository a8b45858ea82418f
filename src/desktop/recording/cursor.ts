/**
 * The pointer drawn into a recording's frames (screen captures do not contain it): an arrow whose tip
 * is at the pointer, black outline and white fill, so it shows on light and dark screens alike. The
 * pixels under it are kept, so that a pointer that moved over a still screen is redrawn without a new
 * capture.
 */

const ARROW = [
  "X",
  "XX",
  "X.X",
  "X..X",
  "X...X",
  "X....X",
  "X.....X",
  "X......X",
  "X.......X",
  "X........X",
  "X.........X",
  "X......XXXXX",
  "X...X..X",
  "X..XX..X",
  "X.X  X..X",
  "XX   X..X",
  "X     X..X",
  "      X..X",
  "       XX",
];
const ARROW_HEIGHT = ARROW.length;
const ARROW_WIDTH = Math.max(...ARROW.map((row) => row.length));

/**
 * A frame of packed pixels (`bytesPerPixel` a pixel: 3 for the feed's B,G,R, 4 for RGBA; black and
 * white are the same in either order) the pointer is drawn into and taken out of again.
 */
export class CursorLayer {
  private readonly saved: Buffer;
  private drawnAt: { x: number; y: number } | null = null;

  constructor(
    private readonly frame: Buffer,
    private readonly width: number,
    private readonly height: number,
    private readonly bytesPerPixel = 4,
  ) {
    this.saved = Buffer.alloc(ARROW_WIDTH * ARROW_HEIGHT * bytesPerPixel);
  }

  /** Where the pointer is drawn now, if it is. */
  get position(): { x: number; y: number } | null {
    return this.drawnAt;
  }

  /** Forgets what was under the pointer: the frame's pixels were replaced by a new capture. */
  forget() {
    this.drawnAt = null;
  }

  /** Draws the pointer with its tip at (x, y), first taking it away from where it was. */
  draw(x: number, y: number) {
    this.erase();
    x = Math.round(x);
    y = Math.round(y);
    if (x < 0 || y < 0 || x >= this.width || y >= this.height) return;
    this.eachRow(x, y, (at, saved, bytes) => this.frame.copy(this.saved, saved, at, at + bytes));
    for (let row = 0; row < ARROW_HEIGHT; row++) {
      const line = ARROW[row];
      for (let col = 0; col < line.length; col++) {
        const px = x + col;
        const py = y + row;
        const mark = line[col];
        if (mark === " " || px >= this.width || py >= this.height) continue;
        const value = mark === "X" ? 0 : 255;
        const at = (py * this.width + px) * this.bytesPerPixel;
        this.frame[at] = value;
        this.frame[at + 1] = value;
        this.frame[at + 2] = value;
      }
    }
    this.drawnAt = { x, y };
  }

  /** Puts back the pixels the pointer covered. */
  erase() {
    if (!this.drawnAt) return;
    const { x, y } = this.drawnAt;
    this.eachRow(x, y, (at, saved, bytes) => this.saved.copy(this.frame, at, saved, saved + bytes));
    this.drawnAt = null;
  }

  /** Calls `visit` with the frame offset, the saved copy's offset and the length of each row of the arrow's box. */
  private eachRow(x: number, y: number, visit: (at: number, saved: number, bytes: number) => void) {
    const size = this.bytesPerPixel;
    const bytes = Math.min(ARROW_WIDTH, this.width - x) * size;
    for (let row = 0; row < ARROW_HEIGHT && y + row < this.height; row++) {
      visit(((y + row) * this.width + x) * size, row * ARROW_WIDTH * size, bytes);
    }
  }
}
