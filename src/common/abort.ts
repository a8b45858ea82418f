/**
 * Deadlines and cancellation as the registry runs commands under them.
 *
 * A `Stop` is what a command runs under: stopped once, with a reason, by its deadline or by its
 * client. It is a plain object with its listeners in an array; the `AbortSignal` handlers pass on
 * (to child processes, fetch, timers) is made only when a handler asks for it. Node's
 * `AbortController` is an EventTarget: making two per command (the client's and the deadline's),
 * with their listeners, was a tenth of a small command's time.
 */
import { CommandError } from "./errors.js";

/** The reason a signal was aborted with, as an Error. */
export function abortError(signal: AbortSignal | Stop): Error {
  return signal.reason instanceof Error ? signal.reason : new Error("aborted");
}

type StopListener = (reason: unknown) => void;

/** Stopped once, with a reason; listened to without an EventTarget, its `signal` made on demand. */
export class Stop {
  private stopped = false;
  private why: unknown;
  private listeners: StopListener[] | undefined;
  private controller: AbortController | undefined;

  get aborted(): boolean {
    return this.stopped;
  }

  get reason(): unknown {
    return this.why;
  }

  /** An AbortSignal that is aborted with this stop's reason (made at the first call). */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.stopped) this.controller.abort(this.why);
    }
    return this.controller.signal;
  }

  /** Stops (once: a later call does nothing) and tells the listeners. */
  stop(reason: unknown): void {
    if (this.stopped) return;
    this.stopped = true;
    this.why = reason;
    const listeners = this.listeners;
    this.listeners = undefined;
    this.controller?.abort(reason);
    if (listeners) for (const listener of listeners) listener(reason);
  }

  /** Calls `listener` once, when this stops (not if it has already stopped). */
  listen(listener: StopListener): void {
    if (this.stopped) return;
    if (this.listeners) this.listeners.push(listener);
    else this.listeners = [listener];
  }

  unlisten(listener: StopListener): void {
    const listeners = this.listeners;
    if (!listeners) return;
    const at = listeners.lastIndexOf(listener);
    if (at >= 0) listeners.splice(at, 1);
  }
}

/** What a command can be stopped by: its client's Stop or AbortSignal. */
export type StopSource = Stop | AbortSignal;

/** Calls `listener` once when `source` stops; returns what removes it. */
function listenTo(source: StopSource, listener: StopListener): () => void {
  if (source instanceof Stop) {
    source.listen(listener);
    return () => source.unlisten(listener);
  }
  const onAbort = () => listener(source.reason);
  source.addEventListener("abort", onAbort, { once: true });
  return () => source.removeEventListener("abort", onAbort);
}

/**
 * The stop a command runs under: stopped with a `CommandError` when its deadline passes or when
 * `client` stops (the client went away), from `arm()` on. A command whose handler answers at once
 * is never armed: no timer, no listener. `release()` drops them once the command is over.
 */
export class CommandStop extends Stop {
  private timer: NodeJS.Timeout | undefined;
  private forget: (() => void) | undefined;

  constructor(
    private readonly deadlineMs: number,
    private readonly client: StopSource | undefined,
  ) {
    super();
    // A client already gone: nothing is started for it.
    if (client?.aborted) this.clientGone(client.reason);
  }

  /** Starts the deadline (from now) and listens to the client. */
  arm(): void {
    if (this.aborted || this.timer) return;
    const seconds = this.deadlineMs / 1000;
    this.timer = setTimeout(
      () => this.stop(new CommandError("timeout", `Command did not finish within ${seconds} s`)),
      this.deadlineMs,
    );
    if (this.client) this.forget = listenTo(this.client, (reason) => this.clientGone(reason));
  }

  release(): void {
    clearTimeout(this.timer);
    this.forget?.();
  }

  private clientGone(reason: unknown) {
    this.stop(
      reason instanceof CommandError
        ? reason
        : new CommandError("cancelled", "Command cancelled: the client went away"),
    );
  }
}

/** Settles as `work` does, or rejects with the stop's reason as soon as it stops. */
export function raceAbort<T>(work: Promise<T>, stop: Stop): Promise<T> {
  if (stop.aborted) return Promise.reject(stop.reason);
  return new Promise<T>((resolve, reject) => {
    stop.listen(reject);
    work.then(
      (value) => {
        stop.unlisten(reject);
        resolve(value);
      },
      (err) => {
        stop.unlisten(reject);
        reject(err);
      },
    );
  });
}
