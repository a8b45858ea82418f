/**
 * The activity timeline: every command any client runs, kept in a bounded ring in memory, with its
 * transport, redacted parameters, duration and outcome. Clicks and drags carry their point in screen
 * pixels and the id of the last screenshot taken before them; the last screenshots are kept (bounded
 * in bytes) so a person can see what the agent saw. Fed by the registry's `observe` option.
 *
 * @example
 * const activity = new ActivityLog({ size: 500 });
 * const registry = new CommandRegistry(commands, { observe: (run) => activity.record(run) });
 */
import { randomUUID } from "node:crypto";
import { Bytes } from "./bytes.js";
import type { CommandFlags } from "./flags.js";
import type { Outcome } from "./outcome.js";

/** One finished command, as the registry reports it. */
export interface CommandRun {
  command: string;
  /** Its definition's flags, which say what to show of it (`pointer`, `capture`). */
  flags: CommandFlags;
  params: unknown;
  transport: string;
  ms: number;
  outcome: Outcome;
}

export interface ActivityEntry {
  id: number;
  /** ISO 8601, when it finished. */
  time: string;
  transport: string;
  command: string;
  params: unknown;
  ms: number;
  success: boolean;
  code?: string;
  error?: string;
  /** Where a click, move or drag ended, in screen pixels. */
  point?: { x: number; y: number };
  /** The screenshot taken before this command (for a pointer command: what the agent had seen). */
  seen?: number;
  /** For a `screenshot`: the id under which its image is kept (`GET /activity/screenshots/{id}`). */
  screenshot?: number;
  /**
   * For an entry that is not a command but something the desktop's host saw (`note`): what
   * happened, in words, e.g. "refused evil.example.net:443 (not in the allow list)".
   */
  text?: string;
}

/** Something the desktop's host saw happen, for the timeline beside the commands (`ActivityLog.note`). */
export interface ActivityNote {
  /** Who saw it, shown where a command's transport is (e.g. `egress`). */
  transport: string;
  /** What kind of thing it is (e.g. `refused`, `allowed`). */
  command: string;
  text: string;
  /** Its details, shown when the entry is opened (redacted as a command's parameters are). */
  params: unknown;
  success: boolean;
}

export interface StoredScreenshot {
  id: number;
  format: string;
  /** The image file's bytes, as the command returned them. */
  bytes: Buffer;
  width: number;
  height: number;
  /** Image pixels per screen pixel, and the image's top-left corner on the screen. */
  scale: number;
  origin: { x: number; y: number };
}

export interface ActivityOptions {
  /** Entries kept (default 500). */
  size?: number;
  /**
   * Bytes of screenshots kept, newest first (default 12 MiB: about 50 changed 1080p JPEGs or 35 PNGs;
   * they stay in memory while the server runs).
   */
  screenshotBytes?: number;
}

/** Names of secret parameters: any `…key` (api_key, X-API-Key) but `key`/`keys` (press_key's), passwords, tokens… */
const SECRET_KEY = /^(?!keys?$).*key|pass(word|wd|phrase)?|token|secret|authori[sz]ation|credential|cookie/i;
const LONG_TEXT = 200;
const REDACTED = "[redacted]";

export class ActivityLog {
  /**
   * The series the ids are numbered in: a new one for each log (each start of the server), so that
   * a client holding ids of an earlier run knows they mean nothing here.
   */
  readonly series = randomUUID();
  private readonly entries: ActivityEntry[] = [];
  private readonly shots: StoredScreenshot[] = [];
  private shotBytes = 0;
  private nextId = 1;
  private lastShot: number | undefined;
  /** When the last command finished (`Date.now()`), or undefined before the first. */
  private lastAt: number | undefined;
  private readonly listeners = new Set<(entry: ActivityEntry) => void>();
  private readonly size: number;
  private readonly screenshotBytes: number;
  /** How many of the entries are notes: at most half the ring, so a chatty host never pushes the commands out. */
  private notes = 0;

  constructor(options: ActivityOptions = {}) {
    this.size = Math.max(1, options.size ?? 500);
    this.screenshotBytes = options.screenshotBytes ?? 12 * 1024 * 1024;
  }

  record(run: CommandRun) {
    const { outcome } = run;
    this.lastAt = Date.now();
    const entry: ActivityEntry = {
      id: this.nextId++,
      time: isoNow(),
      transport: run.transport,
      command: run.command,
      params: redact(run.params),
      ms: Math.round(run.ms * 10) / 10,
      success: outcome.success,
    };
    if (!outcome.success) {
      entry.code = outcome.code;
      entry.error = cut(outcome.error);
    }
    if (run.flags.pointer) {
      const point = pointOf(run.params);
      if (point) entry.point = point;
    }
    if (this.lastShot !== undefined) entry.seen = this.lastShot;
    if (run.flags.capture && outcome.success) entry.screenshot = this.keep(run.params, outcome.result);
    this.append(entry);
  }

  /**
   * Adds what the desktop's host saw (an egress decision) to the timeline, between the commands:
   * it is not a command, so it neither counts as the desktop's use (`lastCommandAt`) nor carries a
   * screenshot. The oldest notes go first once they fill half the ring.
   */
  note(note: ActivityNote) {
    const entry: ActivityEntry = {
      id: this.nextId++,
      time: isoNow(),
      transport: note.transport,
      command: note.command,
      params: redact(note.params),
      ms: 0,
      success: note.success,
      text: cut(note.text),
    };
    this.notes++;
    if (this.notes > Math.max(1, Math.floor(this.size / 2))) {
      const oldest = this.entries.findIndex((kept) => kept.text !== undefined);
      if (oldest >= 0) this.entries.splice(oldest, 1);
      this.notes--;
    }
    this.append(entry);
  }

  private append(entry: ActivityEntry) {
    this.entries.push(entry);
    if (this.entries.length > this.size && this.entries.shift()?.text !== undefined) this.notes--;
    for (const listener of this.listeners) listener(entry);
  }

  /** Entries with an id above `since` (all kept ones by default), oldest first. */
  since(since = 0): ActivityEntry[] {
    const first = this.entries.findIndex((entry) => entry.id > since);
    return first < 0 ? [] : this.entries.slice(first);
  }

  screenshot(id: number): StoredScreenshot | undefined {
    return this.shots.find((shot) => shot.id === id);
  }

  /** When the last command finished (ms since the epoch), or undefined before the first. */
  get lastCommandAt(): number | undefined {
    return this.lastAt;
  }

  /** The screenshot agents were sent last, while it is kept. */
  lastScreenshot(): StoredScreenshot | undefined {
    return this.lastShot === undefined ? undefined : this.screenshot(this.lastShot);
  }

  /** Calls `listener` with every new entry until the returned function is called. */
  subscribe(listener: (entry: ActivityEntry) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private keep(params: unknown, result: unknown): number | undefined {
    const r = result as Partial<Record<string, unknown>>;
    const image = r?.image_data;
    if (!(image instanceof Bytes) || image.data.length > this.screenshotBytes) return undefined;
    const region = (params as { region?: { x?: number; y?: number } } | undefined)?.region;
    const shot: StoredScreenshot = {
      id: this.nextId - 1,
      format: String(r.format),
      // Kept as it is: the handler made these bytes for this reply alone.
      bytes: image.data,
      width: Number(r.width),
      height: Number(r.height),
      scale: Number(r.scale) || 1,
      origin: { x: Math.max(0, Math.floor(region?.x ?? 0)), y: Math.max(0, Math.floor(region?.y ?? 0)) },
    };
    this.shots.push(shot);
    this.shotBytes += shot.bytes.length;
    while (this.shotBytes > this.screenshotBytes) this.shotBytes -= this.shots.shift()?.bytes.length ?? 0;
    this.lastShot = shot.id;
    return shot.id;
  }
}

let lastMs = 0;
let lastIso = "";
/** The time as ISO 8601, made once a millisecond (a busy server finishes many commands in one). */
function isoNow(): string {
  const now = Date.now();
  if (now !== lastMs) {
    lastMs = now;
    lastIso = new Date(now).toISOString();
  }
  return lastIso;
}

/** Levels of nesting kept of a parameter; deeper values are shown as `…`. */
const DEEPEST = 8;

/**
 * A copy of `value` with secrets replaced, long strings cut and deep nesting cut off; `env` values
 * are all redacted.
 */
export function redact(value: unknown, key = "", depth = 0): unknown {
  if (typeof value === "string" || Buffer.isBuffer(value)) {
    if (SECRET_KEY.test(key)) return REDACTED;
    if (typeof value === "string") return cut(value);
    // Bytes a body's base64 was decoded into: shown as that text would be (only its start is made).
    return cut(value.subarray(0, (LONG_TEXT / 4) * 3).toString("base64"), Math.ceil(value.length / 3) * 4);
  }
  if (value === null || typeof value !== "object") return SECRET_KEY.test(key) ? REDACTED : value;
  if (depth >= DEEPEST) return "…";
  if (Array.isArray(value)) return value.slice(0, 50).map((item) => redact(item, key, depth + 1));
  const copy: Record<string, unknown> = {};
  for (const [name, item] of Object.entries(value)) {
    if (key.toLowerCase() === "env") copy[name] = REDACTED;
    else if (SECRET_KEY.test(name)) copy[name] = REDACTED;
    else copy[name] = redact(item, name, depth + 1);
  }
  return copy;
}

/**
 * A long text cut to its start. The start is copied: V8's `slice` of a long string points into the
 * whole string, so a kept slice of a megabyte parameter (write_bytes' content) would keep all of it.
 */
/** `text` cut to its start when longer than LONG_TEXT; `length` is that of the whole text it starts. */
function cut(text: string, length = text.length): string {
  if (length <= LONG_TEXT) return text;
  const start = Buffer.from(text.slice(0, LONG_TEXT), "utf8").toString("utf8");
  return `${start}… (${length} characters)`;
}

/** The point a pointer command went to: `x`/`y`, `coordinate`, or the last point of a `path`. */
function pointOf(params: unknown): { x: number; y: number } | undefined {
  const p = (params ?? {}) as Record<string, unknown>;
  const pair = (value: unknown) =>
    Array.isArray(value) && typeof value[0] === "number" && typeof value[1] === "number"
      ? { x: value[0], y: value[1] }
      : undefined;
  if (typeof p.x === "number" && typeof p.y === "number") return { x: p.x, y: p.y };
  if (Array.isArray(p.path) && p.path.length > 0) {
    const last = p.path[p.path.length - 1];
    if (last && typeof last === "object" && !Array.isArray(last)) return pointOf(last);
    return pair(last);
  }
  return pair(p.coordinate);
}
