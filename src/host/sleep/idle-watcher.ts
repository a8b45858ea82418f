/**
 * Auto-pause (docs/host.md#auto-pause-when-idle): a running desktop with an `idleTimeout` (its own,
 * or its pool's while it is claimed) is asked how long it has been idle (`GET /activity/idle` of
 * its computer server: no command, no live viewer, no person in control, no change of the screen,
 * no busy process) every quarter of its timeout (between 0.5 and 15 s); once that reaches the
 * timeout it is hibernated the usual way (its runtime's default mode), and the lifecycle's
 * `hibernated` event says why. A request to it wakes it (wake-listeners.ts).
 *
 * Time counts from when the desktop last started or woke, too: one woken by a request that ran no
 * command is not put back to sleep at once. A desktop whose server cannot say (an older server, no
 * answer) is left awake. A desktop may name the mode it is hibernated in when idle (`idleMode`:
 * `disk` frees a container's memory, which `paused` keeps). The timeouts and modes are kept in
 * `<home>/.idle/timeouts.json`: a desktop's seconds, or `{"seconds", "mode"}` when it has a mode.
 */
import { readFile } from "node:fs/promises";
import { writeFileAtomic } from "../../common/atomic-write.js";
import { makeDirectory } from "../../os/make-directory.js";
import type { DesktopRecord } from "../desktops/desktop-record.js";
import { HIBERNATION_MODES, type HibernationMode } from "../desktops/hibernation.js";
import type { HostLog } from "../host-log.js";
import type { Lifecycle } from "./lifecycle.js";

/** How often the watcher looks for desktops due a look. */
const TICK_MS = 250;
/** The shortest and longest time between two looks at one desktop. */
const MIN_LOOK_MS = 500;
const MAX_LOOK_MS = 15_000;
/** A look at a desktop's server gives up after this long (and the desktop stays awake). */
const LOOK_TIMEOUT_MS = 5000;

/** What a computer server answers at `GET /activity/idle` (the fields the watcher reads). */
interface IdleReport {
  idle_s: number;
  viewers: number;
  control: boolean;
  busy: boolean;
}

/** What the watcher asks of the VM service. */
export interface IdleHost {
  find(name: string): Promise<DesktopRecord>;
  hibernate(name: string, why: string, mode?: HibernationMode): Promise<unknown>;
  readonly lifecycle: Lifecycle;
}

interface Watched {
  /** When it is looked at next (`Date.now()`). */
  nextAt: number;
  /** Since when it has been awake, as far as the watcher knows. */
  awakeSince?: number;
  startedAt?: string | null;
  looking?: boolean;
}

export class IdleWatcher {
  private readonly timeouts = new Map<string, number>();
  private readonly modes = new Map<string, HibernationMode>();
  private readonly watched = new Map<string, Watched>();
  private readonly unreadable = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private writes: Promise<unknown> = Promise.resolve();
  private readonly looks = new Set<Promise<void>>();
  private stopLifecycle: (() => void) | undefined;

  constructor(
    private readonly host: IdleHost,
    private readonly file: () => Promise<string>,
    private readonly log: HostLog,
    /** The idle timeout of a claimed pool desktop, from its pool (pools/pool-manager.ts). */
    private readonly claimedTimeouts: () => Map<string, number> = () => new Map(),
  ) {}

  /** Reads the kept timeouts and starts watching; once at start. */
  async start() {
    const text = await readFile(await this.file(), "utf8").catch(() => "{}");
    try {
      for (const [name, kept] of Object.entries(JSON.parse(text) as Record<string, unknown>)) {
        const { seconds, mode } = (typeof kept === "object" && kept !== null ? kept : { seconds: kept }) as {
          seconds?: unknown;
          mode?: unknown;
        };
        if (typeof seconds === "number" && seconds > 0) this.timeouts.set(name, seconds);
        if (HIBERNATION_MODES.includes(mode as HibernationMode))
          this.modes.set(name, mode as HibernationMode);
      }
    } catch {
      await this.log.error("The idle timeouts file is not JSON: no desktop is paused when idle", {});
    }
    this.stopLifecycle = this.host.lifecycle.on((event) => {
      if (event.type === "deleted") {
        this.modes.delete(event.name);
        void this.set(event.name, null).catch(() => undefined);
      } else if (event.type === "started" || event.type === "resumed" || event.type === "woke") {
        const watched = this.watched.get(event.name);
        if (watched) watched.awakeSince = Date.now();
      }
    });
    this.timer = setInterval(() => this.tick(), TICK_MS);
    this.timer.unref();
  }

  /** The desktop's own idle timeout in seconds, or null (off). */
  timeoutOf(name: string): number | null {
    return this.timeouts.get(name) ?? null;
  }

  /** The mode the desktop is hibernated in when idle, or null (its runtime's default). */
  modeOf(name: string): HibernationMode | null {
    return this.modes.get(name) ?? null;
  }

  /** Sets (a mode) or clears (null: the runtime's default) what an idle hibernation keeps; kept on disk. */
  async setMode(name: string, mode: HibernationMode | null) {
    if (mode === null) {
      if (!this.modes.delete(name)) return;
    } else this.modes.set(name, mode);
    await this.save();
  }

  /** Sets (seconds) or clears (null) the desktop's own idle timeout; kept on disk. */
  async set(name: string, seconds: number | null) {
    if (seconds === null) {
      if (!this.timeouts.delete(name)) return;
    } else {
      this.timeouts.set(name, seconds);
      // Counted from now: a timeout set on a desktop idle for long does not pause it at once.
      this.watched.set(name, { nextAt: Date.now(), awakeSince: Date.now() });
    }
    await this.save();
  }

  async close() {
    clearInterval(this.timer);
    this.stopLifecycle?.();
    await Promise.allSettled([...this.looks]);
    await this.writes;
  }

  private save() {
    const names = new Set([...this.timeouts.keys(), ...this.modes.keys()]);
    const kept = Object.fromEntries(
      [...names].map((name) => {
        const seconds = this.timeouts.get(name) ?? null;
        const mode = this.modes.get(name);
        return [name, mode ? { seconds, mode } : seconds];
      }),
    );
    const write = this.writes.then(async () => {
      const file = await this.file();
      await makeDirectory(file.slice(0, file.lastIndexOf("/")));
      await writeFileAtomic(file, `${JSON.stringify(kept, null, 2)}\n`, { mode: 0o600 });
    });
    this.writes = write.catch(() => undefined);
    return write;
  }

  /** Every desktop with a timeout now: its own, else its pool's while claimed. */
  private due(): Map<string, number> {
    const all = new Map(this.claimedTimeouts());
    for (const [name, seconds] of this.timeouts) all.set(name, seconds);
    return all;
  }

  private tick() {
    const now = Date.now();
    const due = this.due();
    for (const name of this.watched.keys()) if (!due.has(name)) this.watched.delete(name);
    for (const [name, seconds] of due) {
      let watched = this.watched.get(name);
      if (!watched) {
        watched = { nextAt: now };
        this.watched.set(name, watched);
      }
      if (watched.looking || watched.nextAt > now) continue;
      watched.looking = true;
      const look = this.look(name, seconds, watched).finally(() => {
        watched.looking = false;
        watched.nextAt = Date.now() + Math.min(MAX_LOOK_MS, Math.max(MIN_LOOK_MS, (seconds * 1000) / 4));
        this.looks.delete(look);
      });
      this.looks.add(look);
    }
  }

  private async look(name: string, seconds: number, watched: Watched) {
    const record = await this.host.find(name).catch(() => undefined);
    if (record?.status !== "running" || !record.ready || !record.computerServerUrl) {
      watched.awakeSince = undefined;
      return;
    }
    if (watched.startedAt !== record.startedAt) {
      watched.startedAt = record.startedAt;
      watched.awakeSince = Date.now();
    }
    watched.awakeSince ??= Date.now();
    const report = await this.ask(record);
    if (!report) return;
    const idle = Math.min(report.idle_s, (Date.now() - watched.awakeSince) / 1000);
    if (idle < seconds) return;
    const why =
      `idle for ${Math.floor(idle)} s (idleTimeout ${seconds} s): no command, live viewer, ` +
      "person in control, screen change or busy process";
    try {
      await this.host.hibernate(name, why, this.modes.get(name));
      watched.awakeSince = undefined;
      await this.log.info("Desktop paused when idle", { vm: name, idleSeconds: Math.floor(idle), seconds });
    } catch (err) {
      // Stopped, woken or hibernated meanwhile (a 409), or a failure the lifecycle already told.
      await this.log.info("An idle desktop was not paused", { vm: name, error: (err as Error).message });
    }
  }

  /** The desktop's own account of its idleness; undefined (it stays awake) when it cannot give one. */
  private async ask(record: DesktopRecord): Promise<IdleReport | undefined> {
    try {
      const res = await fetch(new URL("/activity/idle", record.computerServerUrl as string), {
        headers: record.apiKey ? { "x-api-key": record.apiKey } : {},
        signal: AbortSignal.timeout(LOOK_TIMEOUT_MS),
      });
      const body = (await res.json().catch(() => undefined)) as IdleReport | undefined;
      if (res.ok && typeof body?.idle_s === "number") {
        this.unreadable.delete(record.name);
        return body;
      }
      throw new Error(`GET /activity/idle answered ${res.status}`);
    } catch (err) {
      if (!this.unreadable.has(record.name)) {
        this.unreadable.add(record.name);
        await this.log.info("A desktop cannot say whether it is idle: it is left awake", {
          vm: record.name,
          error: (err as Error).message,
        });
      }
      return undefined;
    }
  }
}
