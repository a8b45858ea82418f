/**
 * Screen capture over one X connection: MIT-SHM `GetImage` into a shared segment (an unlinked
 * /dev/shm file the server maps, read back with one `pread`), with the core `GetImage` as the
 * fallback. DAMAGE tells when the screen has not changed since the last capture, so that capture is
 * handed out again without touching the pixels.
 *
 * The X server gives 32-bit pixels as B,G,R,X bytes. A byte swap of each pixel turns them into
 * X,R,G,B, and the same buffer seen from its second byte is R,G,B,X: RGBA order whose fourth byte is
 * padding, which the `RawImage` contract allows. The swap, and the packed R,G,B an encoder asks for
 * (`RawImage.rgb`), are WebAssembly SIMD over the buffer (pixels.ts): no per-pixel JavaScript, and
 * no libvips pipeline only to drop the fourth byte.
 *
 * Each capture also tells which of its rows may differ from an earlier capture's
 * (`RawImage.changedSince`): the rows DAMAGE reported changed from the earlier capture's on, and
 * those the captures in between read. A change drawn after a capture's damage was taken but before
 * its pixels were read may be in the pixels and is only reported to the next capture: so the earlier
 * capture's own damage counts too (its rows were read by it, and by the other buffer's next capture).
 *
 * Two pixel buffers are used in turn (each capture overwrites the one the previous capture did not
 * use): a fresh 8 MB buffer per 1080p capture costs more in page faults (about 10 ms) than the whole
 * copy out of the shared segment. Each holds a capture and, after it, room for its R,G,B form (whose
 * pages are only touched when an encoder asks for it). After a few idle seconds they are let go,
 * with the last capture and the shared segment.
 */
import { closeSync, ftruncateSync, openSync, readSync, unlinkSync } from "node:fs";
import { CommandError } from "../../common/errors.js";
import { IDLE_RELEASE_MS, idleTimer } from "../../common/idle.js";
import { settled } from "../../common/settled.js";
import type { ChangeWatch, RawImage, Rect, Rows, Size } from "../backend.js";
import { PixelMemory } from "../pixels.js";
import type { XConnection, XExtension } from "./connection.js";

const Z_PIXMAP = 2;
const ALL_PLANES = 0xffffffff;
/** The least damaged box (in pixels, 48x48) that counts as a change of the screen for `lastChange`. */
export const NOTICED_AREA = 48 * 48;
/** A DamageNotify each time the damaged area's bounding box grows, with that box. */
const DAMAGE_REPORT_BOUNDING_BOX = 2;

let segmentCounter = 0;

/** A shared-memory segment attached to the X server through MIT-SHM `AttachFd`. */
class ShmSegment {
  private constructor(
    readonly xid: number,
    readonly fd: number,
    readonly size: number,
  ) {}

  static async attach(conn: XConnection, shm: XExtension, size: number): Promise<ShmSegment> {
    const path = `/dev/shm/hangar-capture-${process.pid}-${segmentCounter++}`;
    const fd = openSync(path, "w+", 0o600);
    try {
      ftruncateSync(fd, size);
    } finally {
      unlinkSync(path);
    }
    const xid = conn.X.AllocID();
    try {
      await conn.call<void>((cb) => shm.AttachFd(xid, fd, false, (err: Error | null) => cb(err, undefined)));
    } catch (err) {
      closeSync(fd);
      throw err;
    }
    return new ShmSegment(xid, fd, size);
  }

  /** Copies the segment's `length` bytes from `at` into `target` at the same place. */
  read(target: Buffer, at: number, length: number) {
    let done = 0;
    while (done < length) {
      const n = readSync(this.fd, target, at + done, length - done, at + done);
      if (n <= 0) throw new Error("short read from the shared-memory segment");
      done += n;
    }
  }

  release(conn: XConnection, shm: XExtension) {
    try {
      if (conn.alive) shm.Detach(this.xid);
    } finally {
      closeSync(this.fd);
    }
  }
}

export class ScreenCapture {
  private segment: ShmSegment | null = null;
  private shmBroken = false;
  /** How many DamageNotify events have come; a capture remembers the count it saw (see `seen`). */
  private changes = 0;
  /** For each capture handed out: `changes` when its pixels were read. */
  private readonly seen = new WeakMap<RawImage, number>();
  /** When the screen last changed by at least `NOTICED_AREA` pixels (`Date.now()`), see `lastChange`. */
  private changedAt = Date.now();
  /** Where it changed since the last capture (the union of the DamageNotify boxes). */
  private damaged: Rect | null = null;
  /**
   * For each pixel buffer: the capture region it holds and where the screen changed since (null:
   * nowhere), so that a capture into it reads only those rows again. Unknown: read it all.
   */
  private readonly held: ({ key: string; stale: Rect | null } | undefined)[] = [undefined, undefined];
  /** How many captures read pixels; each image handed out remembers its number and region. */
  private reads = 0;
  private readonly readOf = new WeakMap<RawImage, { read: number; key: string }>();
  /** For the last `HISTORY` reads (at `read % HISTORY`): what DAMAGE reported before it, and what it read. */
  private readonly history: ({ damaged: Rect | null; read: Rect | null } | undefined)[] = [];
  private damageId: number | null = null;
  private last: { key: string; image: RawImage } | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly buffers: (PixelMemory | undefined)[] = [undefined, undefined];
  private turn = 0;
  private readonly idle = idleTimer(IDLE_RELEASE_MS, () => {
    this.releaseBuffers();
    // The shared segment too, between two captures: its pages are the desktop's memory (4 MB at
    // 1280x800, charged to the container's cgroup) and attaching a new one costs a round trip.
    this.queue = settled(this.queue.then(() => this.releaseSegment()));
  });
  /** Callers of `waitForChange`, woken by the next DamageNotify. */
  private readonly changeWaiters = new Set<() => void>();
  /** The watches of `watch()` still running, each told of every change. */
  private readonly watches = new Set<DamageWatch>();

  private constructor(
    private readonly conn: XConnection,
    private readonly shm: XExtension | null,
    private readonly damage: XExtension | null,
  ) {
    // A lost connection gives its shared-memory segment back at once (the X server is gone).
    conn.onClose(() => this.close());
    if (damage) {
      this.damageId = conn.X.AllocID();
      damage.Create(this.damageId, conn.root, DAMAGE_REPORT_BOUNDING_BOX);
      conn.X.on(
        "event",
        (ev: { name?: string; damage?: number; area?: { x: number; y: number; w: number; h: number } }) => {
          if (ev.name !== "DamageNotify" || ev.damage !== this.damageId) return;
          this.changes++;
          const area = ev.area ? { x: ev.area.x, y: ev.area.y, width: ev.area.w, height: ev.area.h } : FULL;
          this.damaged = union(this.damaged, area);
          if (area.width * area.height >= NOTICED_AREA) this.changedAt = Date.now();
          for (const wake of this.changeWaiters) wake();
          this.changeWaiters.clear();
          if (this.watches.size > 0) {
            // Degenerate boxes (no pixel) are reported too; they change nothing.
            if (area.width > 0 && area.height > 0) for (const watch of this.watches) watch.add(area);
            // The server reports a change only when the damaged box grows: emptied, the next is reported too.
            damage.Subtract(this.damageId, 0, 0);
          }
        },
      );
    }
  }

  /** @param useShm false to read pixels with the core `GetImage` only */
  static async create(conn: XConnection, useShm = true): Promise<ScreenCapture> {
    const shm = useShm ? await optionalExtension(conn, "shm") : null;
    const damage = await optionalExtension(conn, "damage");
    const capture = new ScreenCapture(conn, shm, damage);
    await conn.sync();
    return capture;
  }

  /** The current size of the screen (asked each time, so a resize is seen). */
  async screenSize(): Promise<Size> {
    const geometry = await this.conn.call<{ width: number; height: number }>((cb) =>
      this.conn.X.GetGeometry(this.conn.root, cb),
    );
    return { width: geometry.width, height: geometry.height };
  }

  /** Which capture path is in use: `shm` or `core`. */
  get method(): "shm" | "core" {
    return this.shm && !this.shmBroken ? "shm" : "core";
  }

  /**
   * Resolves true as soon as the screen may have changed since `since` was captured (at once if it
   * has, or if `since` is not one of this capture's images), false after `timeoutMs` without a
   * change. Each watcher passes its own last image: a capture made by someone else in between does
   * not hide a change from it. Without DAMAGE it cannot tell: true at once.
   */
  waitForChange(since: RawImage | undefined, timeoutMs: number): Promise<boolean> {
    const seen = since && this.seen.get(since);
    if (this.damageId === null || seen === undefined || seen !== this.changes || !this.conn.alive) {
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.changeWaiters.delete(wake);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.changeWaiters.delete(wake);
        resolve(false);
      }, timeoutMs);
      this.changeWaiters.add(wake);
    });
  }

  /**
   * Records every change of the screen from now on (undefined without DAMAGE). Costs one request
   * without a reply: the damage region is emptied, so that a change inside what was already damaged
   * is reported too (the captures keep their own account of what changed, from the same events).
   */
  watch(): ChangeWatch | undefined {
    if (this.damageId === null || !this.conn.alive) return undefined;
    this.damage.Subtract(this.damageId, 0, 0);
    const watch = new DamageWatch(() => this.watches.delete(watch));
    this.watches.add(watch);
    return watch;
  }

  /**
   * When the screen last changed by a box of at least `NOTICED_AREA` pixels (a blinking caret or the
   * panel's clock is less), as far as DamageNotify has told: since the damage region is emptied only
   * by captures and by this call, a change is seen at the latest at the first call after it. Costs a
   * round trip (which delivers the events so far) and a request without a reply. Without DAMAGE: undefined.
   */
  async lastChange(): Promise<number | undefined> {
    if (this.damageId === null || !this.conn.alive) return undefined;
    await this.conn.sync();
    this.damage.Subtract(this.damageId, 0, 0);
    return this.changedAt;
  }

  capture(region?: Rect): Promise<RawImage> {
    const run = this.queue.then(() => this.captureNow(region));
    this.queue = settled(run);
    return run;
  }

  close() {
    this.idle.cancel();
    // Whoever waits for a change looks now, and finds the connection gone.
    for (const wake of this.changeWaiters) wake();
    for (const watch of this.watches) watch.stop();
    this.releaseBuffers();
    this.releaseSegment();
  }

  private releaseSegment() {
    const segment = this.segment;
    this.segment = null;
    if (segment && this.shm) segment.release(this.conn, this.shm);
  }

  /** Drops the pixel buffers and the last capture (the next capture reads the screen afresh). */
  private releaseBuffers() {
    this.buffers.fill(undefined);
    this.history.length = 0;
    this.held.fill(undefined);
    this.last = null;
  }

  private async captureNow(region?: Rect): Promise<RawImage> {
    // This round trip also delivers every DamageNotify generated so far.
    const screen = await this.screenSize();
    const rect = clampRegion(region, screen);
    const key = `${rect.x},${rect.y},${rect.width},${rect.height}`;
    // Nothing changed since the last capture of this region: it is handed out again.
    const last = this.last;
    if (this.damageId !== null && last?.key === key && this.seen.get(last.image) === this.changes) {
      return last.image;
    }

    // What changed since the last capture; without DAMAGE, anything may have.
    let changed: Rect | null = FULL;
    const seen = this.changes;
    if (this.damageId !== null) {
      this.damage.Subtract(this.damageId, 0, 0);
      changed = this.damaged;
      this.damaged = null;
    }
    for (const held of this.held) if (held) held.stale = union(held.stale, changed);
    const pixels = rect.width * rect.height;
    const bytes = pixels * 4;
    // Four spare bytes: the RGBA view starts one byte in. The R,G,B form goes after them.
    const rgbAt = Math.ceil((bytes + 4) / 64) * 64;
    const memory = this.pixelMemory(rgbAt + pixels * 3);
    this.idle.touch();
    // Only the rows of this buffer's last capture that changed since are read again.
    const held = this.held[this.turn];
    const rows = held?.key === key ? rowsWithin(held.stale, rect) : { top: 0, height: rect.height };
    this.held[this.turn] = undefined;
    if (rows.height > 0) {
      const from = rows.top * rect.width * 4;
      const length = rows.height * rect.width * 4;
      const part = { x: rect.x, y: rect.y + rows.top, width: rect.width, height: rows.height };
      const byteOrder = await this.grab(part, memory.bytes, from, length);
      if (byteOrder === 0) memory.swap32(from, length);
    }
    this.held[this.turn] = { key, stale: null };
    const read = ++this.reads;
    this.history[read % HISTORY] = {
      damaged: changed,
      read:
        rows.height > 0 ? { x: rect.x, y: rect.y + rows.top, width: rect.width, height: rows.height } : null,
    };
    const rgb = memory.bytes.subarray(rgbAt, rgbAt + pixels * 3);
    /** Rows already made in R,G,B. */
    const made = new Uint8Array(rect.height);
    const image: RawImage = {
      width: rect.width,
      height: rect.height,
      channels: 4,
      data: memory.bytes.subarray(1, bytes + 1),
      rgb: (top = 0, rows = rect.height) => {
        const end = Math.min(rect.height, top + rows);
        for (let y = Math.max(0, top); y < end; ) {
          if (made[y]) {
            y++;
            continue;
          }
          let run = y;
          while (run < end && !made[run]) made[run++] = 1;
          const from = y * rect.width;
          memory.rgbxToRgb(1 + from * 4, rgbAt + from * 3, (run - y) * rect.width);
          y = run;
        }
        return rgb;
      },
      changedSince: (earlier) => this.changedBetween(earlier, read, key, rect),
    };
    this.readOf.set(image, { read, key });
    this.seen.set(image, seen);
    this.last = { key, image };
    return image;
  }

  /**
   * The rows of capture `read` (of region `rect`) that may differ from `earlier`'s: DAMAGE's reports
   * from `earlier`'s own on, and the rows read after it. Undefined for another region, an image not
   * of this capture, or one older than the history.
   */
  private changedBetween(earlier: RawImage, read: number, key: string, rect: Rect): Rows | undefined {
    const from = this.readOf.get(earlier);
    if (!from || from.key !== key || from.read > read || this.reads - from.read >= HISTORY) return undefined;
    if (from.read === read) return { top: 0, height: 0 };
    let changed: Rect | null = null;
    for (let n = from.read; n <= read; n++) {
      const step = this.history[n % HISTORY];
      if (!step) return undefined;
      changed = union(changed, step.damaged);
      if (n > from.read) changed = union(changed, step.read);
    }
    return rowsWithin(changed, rect);
  }

  /** The memory the previous capture did not use, of at least `size` bytes. */
  private pixelMemory(size: number): PixelMemory {
    this.turn ^= 1;
    let memory = this.buffers[this.turn];
    if (!memory || memory.size < size) {
      memory = new PixelMemory(size);
      this.buffers[this.turn] = memory;
      this.held[this.turn] = undefined;
    }
    return memory;
  }

  /**
   * Fills `target` from byte `at` with the `bytes` bytes of `rect`'s X,R,G,B (MSB first) or B,G,R,X
   * (LSB first) pixels; returns the byte order. The shared segment is laid out as `target` is.
   */
  private async grab(rect: Rect, target: Buffer, at: number, bytes: number): Promise<number> {
    const { X, root } = this.conn;
    if (this.shm && !this.shmBroken) {
      try {
        if (!this.segment || this.segment.size < at + bytes) {
          this.segment?.release(this.conn, this.shm);
          this.segment = null;
          const screen = await this.screenSize();
          this.segment = await ShmSegment.attach(
            this.conn,
            this.shm,
            Math.max(at + bytes, screen.width * screen.height * 4),
          );
        }
        const segment = this.segment;
        const reply = await this.conn.call<{ depth: number }>((cb) =>
          this.shm.GetImage(
            root,
            rect.x,
            rect.y,
            rect.width,
            rect.height,
            ALL_PLANES,
            Z_PIXMAP,
            segment.xid,
            at,
            cb,
          ),
        );
        checkDepth(reply.depth);
        segment.read(target, at, bytes);
        return this.conn.info.image_byte_order;
      } catch (err) {
        if (err instanceof CommandError) throw err;
        // A display that advertises MIT-SHM but cannot use it (remote, no /dev/shm): use the core path.
        this.shmBroken = true;
        this.segment = null;
      }
    }
    const image = await this.conn.call<{ depth: number; data: Buffer }>((cb) =>
      X.GetImage(Z_PIXMAP, root, rect.x, rect.y, rect.width, rect.height, ALL_PLANES, cb),
    );
    checkDepth(image.depth);
    if (image.data.length < bytes) throw new CommandError("failed", "The X server returned a short image");
    image.data.copy(target, at, 0, bytes);
    return this.conn.info.image_byte_order;
  }
}

/** How many captures back `RawImage.changedSince` can tell. */
const HISTORY = 16;

/** The most boxes a watch keeps apart; more are merged into the last. */
const WATCH_BOXES = 8;
/** Boxes closer than this are one change. */
const WATCH_MERGE_PX = 16;

class DamageWatch implements ChangeWatch {
  readonly changes: Rect[] = [];
  private readonly waiters = new Set<() => void>();
  private stopped = false;

  constructor(private readonly onStop: () => void) {}

  add(area: Rect) {
    const near = this.changes.findIndex((box) => touches(box, area, WATCH_MERGE_PX));
    if (near >= 0) this.changes[near] = union(this.changes[near], area) as Rect;
    else if (this.changes.length < WATCH_BOXES) this.changes.push(area);
    else this.changes[WATCH_BOXES - 1] = union(this.changes[WATCH_BOXES - 1], area) as Rect;
    for (const wake of this.waiters) wake();
  }

  until(enough: (changes: readonly Rect[]) => boolean, timeoutMs: number, signal?: AbortSignal) {
    if (enough(this.changes)) return Promise.resolve(true);
    if (this.stopped || signal?.aborted) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const done = (value: boolean) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        signal?.removeEventListener("abort", aborted);
        resolve(value);
      };
      const check = () => {
        if (enough(this.changes)) done(true);
        else if (this.stopped) done(false);
      };
      const aborted = () => done(false);
      const timer = setTimeout(() => done(false), timeoutMs);
      signal?.addEventListener("abort", aborted, { once: true });
      this.waiters.add(check);
    });
  }

  stop() {
    if (this.stopped) return;
    this.stopped = true;
    this.onStop();
    for (const wake of this.waiters) wake();
  }
}

/** Whether two boxes overlap or lie within `gap` pixels of each other. */
function touches(a: Rect, b: Rect, gap: number): boolean {
  return (
    a.x - gap < b.x + b.width &&
    b.x - gap < a.x + a.width &&
    a.y - gap < b.y + b.height &&
    b.y - gap < a.y + a.height
  );
}

/** Anything: the box of a change whose place is not known. */
const FULL: Rect = { x: -(2 ** 30), y: -(2 ** 30), width: 2 ** 31, height: 2 ** 31 };

/** The smallest rectangle holding both (null: no rectangle). */
function union(a: Rect | null, b: Rect | null): Rect | null {
  if (!a) return b;
  if (!b) return a;
  const x = Math.min(a.x, b.x);
  const y = Math.min(a.y, b.y);
  return {
    x,
    y,
    width: Math.max(a.x + a.width, b.x + b.width) - x,
    height: Math.max(a.y + a.height, b.y + b.height) - y,
  };
}

/** The rows of `rect` (counted from its top) that `changed` covers; a change beside it counts. */
function rowsWithin(changed: Rect | null, rect: Rect): Rows {
  if (!changed) return { top: 0, height: 0 };
  const top = Math.max(0, changed.y - rect.y);
  const bottom = Math.min(rect.height, changed.y + changed.height - rect.y);
  return bottom > top ? { top, height: bottom - top } : { top: 0, height: 0 };
}

async function optionalExtension(conn: XConnection, name: string): Promise<XExtension | null> {
  try {
    return await conn.extension(name);
  } catch (err) {
    if (err instanceof CommandError) throw err;
    return null;
  }
}

function checkDepth(depth: number) {
  if (depth !== 24 && depth !== 32) {
    throw new CommandError(
      "not_supported",
      `Screens of depth ${depth} are not supported (24 or 32 bits only)`,
    );
  }
}

/** The whole screen, or the asked region after checking that it lies on the screen. */
export function clampRegion(region: Rect | undefined, screen: Size): Rect {
  if (!region) return { x: 0, y: 0, width: screen.width, height: screen.height };
  const x = Math.max(0, Math.floor(region.x));
  const y = Math.max(0, Math.floor(region.y));
  const right = Math.min(screen.width, Math.floor(region.x + region.width));
  const bottom = Math.min(screen.height, Math.floor(region.y + region.height));
  if (right <= x || bottom <= y) {
    throw new CommandError(
      "invalid_params",
      `Invalid params: region ${region.x},${region.y} ${region.width}x${region.height} is outside the ${screen.width}x${screen.height} screen`,
    );
  }
  return { x, y, width: right - x, height: bottom - y };
}
