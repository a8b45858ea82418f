/**
 * Whether the desktop is in use, for whoever decides to put it to sleep (`GET /activity/idle`): the
 * last command any client ran (the timeline), the live viewers connected now, whether a person
 * holds control, when the screen last changed noticeably (X DAMAGE) and whether the desktop's
 * processes are busy (their CPU since the last report). Everything is read when a report is asked
 * for; between reports nothing runs.
 *
 * `idle_s` is the time since the last of these signs of use or work: 0 while a viewer is
 * connected, a person holds control, or the processes were busy since the last report.
 *
 * @example
 * const idleness = new Idleness({ activity, control, desktop });
 * const leave = idleness.viewerJoined(); // a live viewer connected; `leave()` when it goes
 * const { idle_s } = await idleness.report();
 */
import type { DesktopProvider } from "../../desktop/backend.js";
import { CpuUse } from "../../os/cpu-use.js";
import type { ActivityLog } from "./activity.js";
import type { ControlLease } from "./control.js";

/** The desktop's processes using at least this many cores between two reports are busy. */
export const BUSY_CORES = 0.15;
/** The first report has nothing to compare the CPU with: it samples over this long. */
const FIRST_SAMPLE_MS = 250;

export interface IdleReport {
  /** Seconds since the last sign of use or work (0 while a viewer, a person or a busy process is there). */
  idle_s: number;
  /** Seconds since the last command finished, or null when none has run since the server started. */
  command_s: number | null;
  /** Live viewers connected now (`WS /live`, `GET /live.mp4`, share links). */
  viewers: number;
  /** Whether a person holds control (the console's Take control). */
  control: boolean;
  /** Seconds since the screen last changed noticeably, or null when this server cannot tell. */
  screen_s: number | null;
  /** The desktop's processes' CPU use since the last report, in cores (the server's own left out); null when unknown. */
  cpu: number | null;
  /** Whether `cpu` reached `busy_cores`. */
  busy: boolean;
  busy_cores: number;
  /** Seconds since the server started. */
  uptime_s: number;
}

export interface IdlenessOptions {
  activity: ActivityLog;
  control: ControlLease;
  desktop: DesktopProvider;
  cpu?: CpuUse;
}

export class Idleness {
  private readonly started = Date.now();
  private viewers = 0;
  /** When the last viewer went. */
  private viewersLeftAt: number | undefined;
  /** When a report last found the processes busy. */
  private busyAt: number | undefined;
  private readonly cpu: CpuUse;
  /** Whether the CPU was sampled before (the first report samples twice, a moment apart). */
  private sampled = false;

  constructor(private readonly options: IdlenessOptions) {
    this.cpu = options.cpu ?? new CpuUse();
  }

  /** A live viewer connected: call what is returned when it goes (once). */
  viewerJoined(): () => void {
    this.viewers++;
    let gone = false;
    return () => {
      if (gone) return;
      gone = true;
      this.viewers--;
      this.viewersLeftAt = Date.now();
    };
  }

  async report(): Promise<IdleReport> {
    const screenAt = await this.screenChangedAt();
    let cpu = this.cpu.sample();
    if (cpu === undefined && !this.sampled) {
      this.sampled = true;
      await new Promise((resolve) => setTimeout(resolve, FIRST_SAMPLE_MS));
      cpu = this.cpu.sample();
    }
    const now = Date.now();
    const busy = cpu !== undefined && cpu >= BUSY_CORES;
    if (busy) this.busyAt = now;
    const commandAt = this.options.activity.lastCommandAt;
    const control = this.options.control.state.held;
    const present = this.viewers > 0 || control;
    const last = Math.max(
      this.started,
      commandAt ?? 0,
      screenAt ?? 0,
      this.busyAt ?? 0,
      this.viewersLeftAt ?? 0,
      present ? now : 0,
    );
    return {
      idle_s: seconds(now - last),
      command_s: commandAt === undefined ? null : seconds(now - commandAt),
      viewers: this.viewers,
      control,
      screen_s: screenAt === undefined ? null : seconds(now - screenAt),
      cpu: cpu === undefined ? null : Math.round(cpu * 1000) / 1000,
      busy,
      busy_cores: BUSY_CORES,
      uptime_s: seconds(now - this.started),
    };
  }

  private async screenChangedAt(): Promise<number | undefined> {
    try {
      const backend = await this.options.desktop();
      return await backend.lastScreenChange?.();
    } catch {
      return undefined; // no display: nothing to tell
    }
  }
}

function seconds(ms: number): number {
  return Math.max(0, Math.round(ms / 100) / 10);
}
