/**
 * The audit's events in each desktop's own timeline (docs/egress.md#the-audit): every decision the
 * egress proxy makes for a desktop is sent to that desktop's computer server
 * (`POST /activity/egress`, with the desktop's key), so its console shows "refused
 * evil.example.net:443" beside the step that tried it and its trajectories keep it.
 *
 * Events gather for a moment and go together, one request at a time per desktop. Only a running
 * desktop is told (the address of a hibernated one would wake it); what cannot be delivered (a
 * desktop stopping, a server of an older version, which is not asked again until it starts anew)
 * is dropped, said once in the host's log, and stays in the audit (`GET /svc/vms/:name/egress`). A desktop that makes connections faster than
 * its server takes notes loses the oldest first, never the host's memory.
 */
import type { HostLog } from "../host-log.js";
import type { EgressAudit, EgressEvent } from "./audit.js";

/** What the feed needs of a desktop's record. */
export interface FeedTarget {
  name: string;
  status: string;
  /** When it last started: a server without the route is not asked again until it starts anew. */
  startedAt?: string | null;
  computerServerUrl?: string | null;
  apiKey?: string;
}

/** How long events gather before they are sent (a page's many connections go in one request). */
export const GATHER_MS = 100;
/** Events waiting per desktop at most; beyond, the oldest are dropped. */
const MAX_WAITING = 500;
/** Events sent in one request (the computer server takes up to 200). */
const PER_REQUEST = 200;
/** A request that takes longer is given up. */
const SEND_TIMEOUT_MS = 5000;

interface Queue {
  events: EgressEvent[];
  timer?: NodeJS.Timeout;
  /** Events of the request under way (none: no request is). */
  inFlight: number;
}

export class EgressTimelineFeed {
  private readonly queues = new Map<string, Queue>();
  /** Desktops whose last delivery failed: said once in the log, until one succeeds again. */
  private readonly failing = new Set<string>();
  /**
   * Desktops whose computer server has no such route (another image's, an older version), by the
   * start it was found in: their events are not sent while that start lasts.
   */
  private readonly withoutRoute = new Map<string, string | null | undefined>();
  private readonly stopping = new AbortController();
  private readonly unsubscribe: () => void;

  constructor(
    audit: EgressAudit,
    private readonly find: (name: string) => Promise<FeedTarget>,
    private readonly log: HostLog,
  ) {
    this.unsubscribe = audit.subscribe((event) => this.add(event));
  }

  /** Events waiting or being sent, of every desktop (0 once all are delivered or dropped). */
  get waiting(): number {
    let count = 0;
    for (const queue of this.queues.values()) count += queue.events.length + queue.inFlight;
    return count;
  }

  close() {
    this.unsubscribe();
    this.stopping.abort();
    for (const queue of this.queues.values()) clearTimeout(queue.timer);
    this.queues.clear();
  }

  private add(event: EgressEvent) {
    let queue = this.queues.get(event.desktop);
    if (!queue) {
      queue = { events: [], inFlight: 0 };
      this.queues.set(event.desktop, queue);
    }
    queue.events.push(event);
    if (queue.events.length > MAX_WAITING) queue.events.splice(0, queue.events.length - MAX_WAITING);
    this.schedule(event.desktop, queue);
  }

  private schedule(desktop: string, queue: Queue) {
    if (queue.timer || queue.inFlight > 0 || this.stopping.signal.aborted) return;
    queue.timer = setTimeout(() => {
      queue.timer = undefined;
      void this.send(desktop, queue);
    }, GATHER_MS);
    queue.timer.unref();
  }

  private async send(desktop: string, queue: Queue) {
    const events = queue.events.splice(0, PER_REQUEST);
    queue.inFlight = events.length;
    try {
      await this.deliver(desktop, events);
      this.failing.delete(desktop);
    } catch (err) {
      if (!this.stopping.signal.aborted && !this.failing.has(desktop)) {
        this.failing.add(desktop);
        await this.log.info("A desktop's timeline was not told its egress events (they stay in its audit)", {
          vm: desktop,
          events: events.length,
          error: (err as Error).message,
        });
      }
    } finally {
      queue.inFlight = 0;
      if (queue.events.length > 0) this.schedule(desktop, queue);
      else if (this.queues.get(desktop) === queue) this.queues.delete(desktop);
    }
  }

  private async deliver(desktop: string, events: EgressEvent[]) {
    const target = await this.find(desktop);
    // Only a running desktop: the address of a hibernated one wakes it, a stopped one has no server.
    if (target.status !== "running") throw new Error(`it is ${target.status}`);
    if (!target.computerServerUrl) throw new Error("it has no computer server");
    if (this.withoutRoute.has(desktop) && this.withoutRoute.get(desktop) === target.startedAt) return;
    this.withoutRoute.delete(desktop);
    const res = await fetch(new URL("/activity/egress", target.computerServerUrl), {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(target.apiKey && { "x-api-key": target.apiKey, "x-container-name": target.name }),
      },
      body: JSON.stringify({ events: events.map(({ desktop: _, ...event }) => event) }),
      signal: AbortSignal.any([this.stopping.signal, AbortSignal.timeout(SEND_TIMEOUT_MS)]),
    });
    const answer = await res.text();
    if (res.status === 404 || res.status === 405) this.withoutRoute.set(desktop, target.startedAt);
    if (!res.ok) throw new Error(`its computer server answered ${res.status}: ${answer.slice(0, 200)}`);
  }
}
