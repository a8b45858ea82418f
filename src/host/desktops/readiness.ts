/**
 * When a desktop can be used, not only when its process lives: `ready` once its computer server
 * answered `GET /status`, `readyAt`, and `startMs` (from the start, or the restore, to ready).
 *
 * A running desktop whose runtime does not say `ready` itself is probed here: one request at a
 * time to its computer server, every 25 ms for the first 5 s (a container desktop answers within a
 * second, and what a probe waits a start waits), every 100 ms then and every second after a
 * minute, until it answers, the desktop stops or starts again (then whoever waits is told, to look
 * again), or the tracker is closed. A failed look at the record ends nothing. Readiness is kept in
 * memory; after a restart of the service it is observed again (the first probe answers at once
 * for a desktop that was ready).
 */
import { EventEmitter } from "node:events";
import { setTimeout as delay } from "node:timers/promises";
import type { RuntimeRecord } from "./runtime.js";

export interface Readiness {
  ready: boolean;
  /** When the computer server first answered in this run (ISO 8601). */
  readyAt: string | null;
  /** Milliseconds from `startedAt` to `readyAt`. */
  startMs: number | null;
}

/** Reads a desktop's record again, to learn whether the probe should go on. */
export type Lookup = (record: RuntimeRecord) => Promise<RuntimeRecord | undefined>;

interface State {
  startedAt: string;
  readyAt?: string;
  probe?: AbortController;
}

const NOT_READY: Readiness = { ready: false, readyAt: null, startMs: null };
/** A probe request gives up after this long (a guest under load may answer slowly). */
const PROBE_TIMEOUT_MS = 2000;
/** Between two probes: short while a desktop is expected soon, longer after a minute. */
const FIRST_INTERVAL_MS = 25;
const FIRST_PERIOD_MS = 5000;
const FAST_INTERVAL_MS = 100;
const SLOW_INTERVAL_MS = 1000;
const FAST_PERIOD_MS = 60_000;
/** How often a probe loop reads the record again to see the desktop still runs. */
const RECHECK_MS = 2000;

export class ReadinessTracker {
  private readonly states = new Map<string, State>();
  private readonly events = new EventEmitter().setMaxListeners(0);
  private closed = false;

  constructor(
    private readonly lookup: Lookup,
    private readonly probe: (url: string, signal: AbortSignal) => Promise<boolean> = probeStatus,
    /** Told once per run of a desktop, when it first counts as ready, with the start to ready. */
    private readonly onReady?: (record: RuntimeRecord, startMs: number) => void,
  ) {}

  /** The record's readiness; starts a probe of its computer server when none runs yet. */
  of(record: RuntimeRecord): Readiness {
    const key = keyOf(record);
    if (record.status !== "running" || !record.startedAt) {
      this.forget(key);
      return NOT_READY;
    }
    let state = this.states.get(key);
    if (!state || state.startedAt !== record.startedAt) {
      this.forget(key);
      state = { startedAt: record.startedAt };
      this.states.set(key, state);
    }
    if (record.ready !== undefined) {
      if (record.ready && !state.readyAt) this.markReady(record, state);
      if (!record.ready) state.readyAt = undefined;
    } else if (!state.readyAt && !state.probe && record.computerServerUrl && !this.closed) {
      this.startProbe(record, state);
    }
    if (!state.readyAt) return NOT_READY;
    return {
      ready: true,
      readyAt: state.readyAt,
      startMs: Math.max(0, Date.parse(state.readyAt) - Date.parse(state.startedAt)),
    };
  }

  /**
   * Resolves at the next change of desktop `name`'s readiness (of any desktop without a name), or
   * of all desktops at once, or when `signal` aborts: a wait for one desktop is not woken by the
   * others' starts (each wake is a look through the runtime).
   */
  next(signal: AbortSignal, name?: string): Promise<void> {
    return new Promise((resolve) => {
      const done = (changed?: string) => {
        if (name !== undefined && changed !== undefined && changed !== name) return;
        this.events.off("change", done);
        signal.removeEventListener("abort", finish);
        resolve();
      };
      const finish = () => done();
      this.events.on("change", done);
      signal.addEventListener("abort", finish, { once: true });
    });
  }

  /** Something about desktop `name` (without one: about any or all) changed: wake whoever waits. */
  notify(name?: string) {
    this.events.emit("change", name || undefined);
  }

  /**
   * Desktop `name` goes to sleep: its probe ends at once, the request in flight included. (A probe
   * sent after its server went would reach the wake listener that takes its address, and wake it.)
   */
  stopProbing(name: string) {
    for (const key of [...this.states.keys()]) if (key.slice(key.indexOf("/") + 1) === name) this.forget(key);
  }

  close() {
    this.closed = true;
    for (const key of [...this.states.keys()]) this.forget(key);
    this.notify();
  }

  private forget(key: string) {
    this.states.get(key)?.probe?.abort();
    this.states.delete(key);
  }

  private markReady(record: RuntimeRecord, state: State) {
    state.readyAt = new Date().toISOString();
    if (this.states.get(keyOf(record)) !== state) return;
    this.notify(record.name);
    this.onReady?.(record, Math.max(0, Date.parse(state.readyAt) - Date.parse(state.startedAt)));
  }

  private startProbe(record: RuntimeRecord, state: State) {
    const controller = new AbortController();
    state.probe = controller;
    const { signal } = controller;
    const url = record.computerServerUrl as string;
    void (async () => {
      const started = Date.now();
      let checked = started;
      while (!signal.aborted) {
        if (await this.probe(url, signal)) {
          if (!signal.aborted) this.markReady(record, state);
          break;
        }
        const elapsed = Date.now() - started;
        const interval =
          elapsed < FIRST_PERIOD_MS
            ? FIRST_INTERVAL_MS
            : elapsed < FAST_PERIOD_MS
              ? FAST_INTERVAL_MS
              : SLOW_INTERVAL_MS;
        await delay(interval, undefined, { signal }).catch(() => undefined);
        if (Date.now() - checked >= RECHECK_MS && !signal.aborted) {
          checked = Date.now();
          // A lookup that fails (an engine or API server slow under load) says nothing: go on.
          const now = await this.lookup(record).then(
            (found) => ({ found }),
            () => undefined,
          );
          if (now && (now.found?.status !== "running" || now.found.startedAt !== state.startedAt)) break;
        }
      }
      if (state.probe === controller) state.probe = undefined;
      // Ended without an answer (the desktop stopped or started again): whoever waits reads the
      // record again, which starts a new probe if it runs.
      if (!signal.aborted && !state.readyAt) this.notify(record.name);
    })();
  }
}

function keyOf(record: RuntimeRecord): string {
  return `${record.runtime}/${record.name}`;
}

/** True when `GET <url>/status` answers 200 (the computer server never asks for a key there). */
export async function probeStatus(url: string, signal: AbortSignal): Promise<boolean> {
  try {
    const response = await fetch(new URL("/status", url), {
      signal: AbortSignal.any([signal, AbortSignal.timeout(PROBE_TIMEOUT_MS)]),
    });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}
