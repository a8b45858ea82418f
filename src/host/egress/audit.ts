/**
 * Every egress decision, written down: each refused connection at once, each allowed one when it
 * ends (with its bytes), as a line of the host's log (`Egress refused` / `Egress allowed`) and as
 * an event kept per desktop (the last `MAX_EVENTS`) for `GET /svc/vms/:name/egress`.
 */
import type { HostLog } from "../host-log.js";

/** How the desktop asked: the proxy (`CONNECT` or an absolute URL), HTTP or TLS by name, or DNS. */
export type EgressVia = "connect" | "proxy" | "http" | "tls" | "dns";

export interface EgressEvent {
  time: string;
  desktop: string;
  via: EgressVia;
  /** The name asked for (Host, SNI, CONNECT target, DNS question); null for an address. */
  name: string | null;
  /** The address connected to (or refused); null when no address was reached. */
  address: string | null;
  port: number | null;
  allowed: boolean;
  /** The allow entry that let it through, or why it was refused. */
  rule: string;
  /** Bytes sent by the desktop and received by it, once an allowed connection ended. */
  bytesOut?: number;
  bytesIn?: number;
  /** The secret whose credential the proxy added (its name only). */
  credential?: string;
}

/** Events kept per desktop. */
export const MAX_EVENTS = 500;

export class EgressAudit {
  private readonly events = new Map<string, EgressEvent[]>();
  private readonly listeners = new Set<(event: EgressEvent) => void>();

  constructor(private readonly log: HostLog) {}

  record(event: Omit<EgressEvent, "time">) {
    const full: EgressEvent = { time: new Date().toISOString(), ...event };
    let list = this.events.get(event.desktop);
    if (!list) {
      list = [];
      this.events.set(event.desktop, list);
    }
    list.push(full);
    if (list.length > MAX_EVENTS) list.splice(0, list.length - MAX_EVENTS);
    for (const listener of this.listeners) listener(full);
    const target = `${full.name ?? full.address ?? "?"}${full.port ? `:${full.port}` : ""}`;
    void this.log.info(full.allowed ? "Egress allowed" : "Egress refused", {
      vm: full.desktop,
      via: full.via,
      target,
      name: full.name ?? undefined,
      address: full.address ?? undefined,
      port: full.port ?? undefined,
      rule: full.rule,
      bytesOut: full.bytesOut,
      bytesIn: full.bytesIn,
      credential: full.credential,
    });
  }

  /** The desktop's last events, oldest first (at most `limit`). */
  list(desktop: string, limit = MAX_EVENTS): EgressEvent[] {
    const list = this.events.get(desktop) ?? [];
    return list.slice(Math.max(0, list.length - limit));
  }

  forget(desktop: string) {
    this.events.delete(desktop);
  }

  /** Calls `listener` with every new event; returns what stops it. */
  subscribe(listener: (event: EgressEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
