/**
 * Control as a lease: at most one holder drives the desktop (a person who took control in the
 * console); while someone holds it, everyone else's input commands either wait for the hand-back
 * (within their own deadline) or fail at once with `paused`, naming who holds control and since
 * when. An agent asks for a person with `request_help`; the person's hand-back answers it with a note.
 *
 * The registry asks `admit()` before an input command joins the input queue and `allows()` when it
 * reaches the head of the queue: a command queued before a takeover is sent back (to wait or fail)
 * rather than run in the middle of the person's typing.
 *
 * @example
 * const control = new ControlLease();
 * const lease = control.take("person in the console");      // the console's "Take control"
 * await registry.run("left_click", {}, { holder: lease });   // the person's input runs
 * await registry.run("left_click", {}, { whenPaused: "fail" }); // an agent's: `paused`
 * control.handBack(lease, "logged in, the 2FA code is entered");
 */
import { CommandError } from "../../common/errors.js";

/** What an input command does while someone else holds control. */
export type WhenPaused = "queue" | "fail";

/** Proof of holding control: what `take()` returned. */
export interface Lease {
  readonly id: number;
  readonly who: string;
  readonly since: string;
}

export interface HelpRequest {
  readonly id: number;
  readonly reason: string;
  readonly since: string;
}

export interface ControlState {
  held: boolean;
  by?: string;
  since?: string;
  /** Help asked for by `request_help` and not yet answered. */
  help: HelpRequest[];
}

/** What happened, for the activity timeline and `/events`. */
export type ControlEvent =
  | { type: "control_taken"; who: string; since: string }
  | { type: "control_returned"; who: string; held_s: number; note?: string }
  | { type: "help_requested"; id: number; reason: string }
  | { type: "help_ended"; id: number; answered: boolean };

export interface HandBack {
  by: string;
  note: string;
  at: string;
}

export class ControlLease {
  private holder: Lease | undefined;
  private nextId = 1;
  /** Waiters for the next hand-back (input commands in `queue` mode, `request_help`). */
  private readonly waiting = new Set<(handBack: HandBack) => void>();
  private readonly help = new Map<number, HelpRequest>();
  private readonly listeners = new Set<(event: ControlEvent) => void>();

  get state(): ControlState {
    return {
      held: this.holder !== undefined,
      ...(this.holder ? { by: this.holder.who, since: this.holder.since } : {}),
      help: [...this.help.values()],
    };
  }

  /** Takes control for `who`; refused while someone holds it (hand it back first). */
  take(who: string): Lease {
    if (this.holder) {
      throw new CommandError(
        "conflict",
        `Control is already held by ${this.holder.who} since ${this.holder.since}: hand it back first`,
        { held_by: this.holder.who, since: this.holder.since },
      );
    }
    const lease = { id: this.nextId++, who, since: new Date().toISOString() };
    this.holder = lease;
    this.emit({ type: "control_taken", who, since: lease.since });
    return lease;
  }

  /** Hands control back; only its holder can. Answers every pending `request_help` with `note`. */
  handBack(lease: Lease | undefined, note = ""): HandBack {
    if (!lease || this.holder?.id !== lease.id) {
      throw new CommandError(
        "conflict",
        this.holder
          ? `Only the holder of control can hand it back (${this.holder.who} holds it since ${this.holder.since})`
          : "Control is not held: there is nothing to hand back",
      );
    }
    this.holder = undefined;
    const handBack = { by: lease.who, note, at: new Date().toISOString() };
    const heldS = Math.round((Date.parse(handBack.at) - Date.parse(lease.since)) / 100) / 10;
    this.emit({ type: "control_returned", who: lease.who, held_s: heldS, ...(note ? { note } : {}) });
    const waiting = [...this.waiting];
    this.waiting.clear();
    for (const wake of waiting) wake(handBack);
    return handBack;
  }

  /** True when `lease` is the one holding control now. */
  holds(lease?: Lease): boolean {
    return this.holder !== undefined && this.holder.id === lease?.id;
  }

  /** True when `lease` may drive now: nobody holds control, or it is the holder's own input. */
  allows(lease?: Lease): boolean {
    return this.holder === undefined || this.holder.id === lease?.id;
  }

  /**
   * Resolves when `lease`'s input may run; in `fail` mode throws `paused` at once while another holds
   * control, in `queue` mode waits for the hand-back until `signal` aborts (the command's deadline).
   */
  async admit(lease: Lease | undefined, mode: WhenPaused, signal: AbortSignal): Promise<void> {
    while (!this.allows(lease)) {
      const holder = this.holder as Lease;
      if (mode === "fail") {
        throw new CommandError(
          "paused",
          `Paused: ${holder.who} holds control since ${holder.since}; input is refused until it is handed back`,
          { held_by: holder.who, since: holder.since },
        );
      }
      await this.nextHandBack(signal);
    }
  }

  /**
   * Asks for a person: shown until the next hand-back, which answers it (its note), or until
   * `signal` aborts (the timeout).
   */
  async requestHelp(reason: string, signal: AbortSignal): Promise<HandBack> {
    const request = { id: this.nextId++, reason, since: new Date().toISOString() };
    this.help.set(request.id, request);
    this.emit({ type: "help_requested", id: request.id, reason });
    let answered = false;
    try {
      const handBack = await this.nextHandBack(signal);
      answered = true;
      return handBack;
    } finally {
      this.help.delete(request.id);
      this.emit({ type: "help_ended", id: request.id, answered });
    }
  }

  /** Calls `listener` with every change until the returned function is called. */
  subscribe(listener: (event: ControlEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private nextHandBack(signal: AbortSignal): Promise<HandBack> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const onAbort = () => {
        this.waiting.delete(wake);
        reject(signal.reason);
      };
      const wake = (handBack: HandBack) => {
        signal.removeEventListener("abort", onAbort);
        resolve(handBack);
      };
      this.waiting.add(wake);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  private emit(event: ControlEvent) {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A watcher never breaks the lease.
      }
    }
  }
}
