/**
 * The desktop's own wallpaper on X11: a vertical gradient tiled across the root window from a pixmap
 * a few pixels wide and as tall as the screen. A picture of the whole screen (xwallpaper's) held
 * 4 MB of the X server's memory at 1280x800 and 8 MB at 1080p, per desktop; the column holds 32 KB.
 *
 * The pixmap outlives this connection (RetainPermanent) and is published as `_XROOTPMAP_ID` and
 * `ESETROOT_PMAP_ID`, as xwallpaper, feh and hsetroot do: a later wallpaper set by any of them
 * (`set_wallpaper` runs xwallpaper) frees it by killing those resources.
 */
import type { XConnection } from "./connection.js";

/** A colour as [red, green, blue], 0–255. */
export type Rgb = readonly [number, number, number];

/** The column's width: a tile at least 32 bits wide is painted a word at a time. */
const TILE_WIDTH = 8;
/** Rows per PutImage: well within a request without BIG-REQUESTS (256 KiB). */
const ROWS_PER_REQUEST = 1024;
const Z_PIXMAP = 2;
const RETAIN_PERMANENT = 1;
const PROP_MODE_REPLACE = 0;
const ATOM_PIXMAP = 20;
const ROOT_PIXMAP_PROPERTIES = ["_XROOTPMAP_ID", "ESETROOT_PMAP_ID"];

/** Paints the root window with a gradient from `top` (first row) to `bottom` (last row). */
export async function paintRootGradient(conn: XConnection, top: Rgb, bottom: Rgb): Promise<void> {
  const { X, screen } = conn;
  if (screen.root_depth !== 24) {
    throw new Error(`the root window is ${screen.root_depth} bits deep; the gradient needs 24`);
  }
  const atoms = await Promise.all(ROOT_PIXMAP_PROPERTIES.map((name) => conn.atom(name)));
  const killed = await freeEarlierWallpaper(conn, atoms[1]);
  const errors: Error[] = [];
  // The requests below carry no callback: their errors come as events, before the round trip's reply.
  // An earlier wallpaper's client already gone is no error (the sequence number of its KillClient).
  const refused = (err: Error & { seq?: number }) => {
    if (err.seq !== undefined && err.seq !== killed) errors.push(err);
  };
  X.on("error", refused);
  try {
    paint(conn, top, bottom, atoms);
    await conn.sync();
  } finally {
    X.removeListener("error", refused);
  }
  if (errors.length > 0) throw new Error(`the X server refused the wallpaper: ${errors[0].message}`);
}

function paint(conn: XConnection, top: Rgb, bottom: Rgb, atoms: number[]) {
  const { X, root, screen } = conn;
  const height = screen.pixel_height;
  const pixmap = X.AllocID();
  X.CreatePixmap(pixmap, root, screen.root_depth, TILE_WIDTH, height);
  const gc = X.AllocID();
  X.CreateGC(gc, pixmap, {});
  const column = gradientColumn(top, bottom, height, conn.info.image_byte_order === 0);
  const rowBytes = TILE_WIDTH * 4;
  for (let y = 0; y < height; y += ROWS_PER_REQUEST) {
    const rows = Math.min(ROWS_PER_REQUEST, height - y);
    const data = Buffer.alloc(rows * rowBytes);
    for (let row = 0; row < rows; row++) {
      const pixel = column.subarray((y + row) * 4, (y + row + 1) * 4);
      for (let x = 0; x < TILE_WIDTH; x++) pixel.copy(data, row * rowBytes + x * 4);
    }
    X.PutImage(Z_PIXMAP, pixmap, gc, TILE_WIDTH, rows, 0, y, 0, screen.root_depth, data);
  }
  X.FreeGC(gc);
  X.ChangeWindowAttributes(root, { backgroundPixmap: pixmap });
  X.ClearArea(root, 0, 0, 0, 0, 0);
  for (const atom of atoms) X.ChangeProperty(PROP_MODE_REPLACE, root, atom, ATOM_PIXMAP, 32, [pixmap]);
  X.SetCloseDownMode(RETAIN_PERMANENT);
}

/**
 * Frees the wallpaper an earlier setter left (its pixmap in ESETROOT_PMAP_ID, freed with its client's
 * retained resources), as xwallpaper does; returns the KillClient's sequence number, if sent.
 */
async function freeEarlierWallpaper(conn: XConnection, property: number): Promise<number | undefined> {
  const earlier = await conn.call<{ type: number; data: Buffer }>((cb) =>
    conn.X.GetProperty(0, conn.root, property, ATOM_PIXMAP, 0, 1, cb),
  );
  if (earlier.type !== ATOM_PIXMAP || earlier.data.length < 4) return undefined;
  conn.X.KillClient(earlier.data.readUInt32LE(0));
  return conn.X.seq_num;
}
/** One 32-bit pixel per row, in the X server's byte order. */
export function gradientColumn(
  top: Rgb,
  bottom: Rgb,
  height: number,
  leastSignificantFirst: boolean,
): Buffer {
  const column = Buffer.alloc(height * 4);
  for (let y = 0; y < height; y++) {
    const t = height > 1 ? y / (height - 1) : 0;
    const [r, g, b] = top.map((from, i) => Math.round(from + (bottom[i] - from) * t));
    const value = (r << 16) | (g << 8) | b;
    if (leastSignificantFirst) column.writeUInt32LE(value, y * 4);
    else column.writeUInt32BE(value, y * 4);
  }
  return column;
}
