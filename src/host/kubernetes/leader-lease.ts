/**
 * Leader election over a coordination.k8s.io/v1 Lease, as Kubernetes' own controllers do it (the
 * client for Node has no helper for it): every replica of the host service tries, every third of
 * the Lease's duration, to take or renew the Lease named `hangar-pools-leader`; the one named in
 * it is the leader and runs the pools' refilling, checks and claim expiries, while every replica
 * serves claims and releases. Each write is a replace carrying the version last read, so two
 * replicas never both win (the loser's write is refused with 409).
 *
 * A Lease held by another is taken only once it has not changed for its whole duration, counted on
 * this replica's clock from when it was last seen changing (clocks of different machines are not
 * compared). A leader that cannot renew for two thirds of the duration stops leading before anyone
 * else may take over; one that stops cleanly gives the Lease up at once.
 */

import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { CoordinationV1Api, type V1Lease, V1MicroTime } from "@kubernetes/client-node";
import type { HostLog } from "../host-log.js";
import { apiMessage, type Cluster, statusCode } from "./cluster.js";
import { LABEL, MANAGER } from "./objects.js";

export const LEADER_LEASE = "hangar-pools-leader";
export const DEFAULT_LEASE_SECONDS = 15;

export interface LeaderLeaseOptions {
  /** How long a Lease not renewed stays its holder's (default 15 s). */
  durationSeconds?: number;
  /** The Lease's name (default `hangar-pools-leader`). */
  name?: string;
  /** This replica's name in the Lease (default: host name (the Pod's name in a Pod), process id, a random suffix). */
  identity?: string;
}

export interface Leadership {
  /** Called when this replica becomes the leader. */
  lead(): void;
  /** Called when it stops being the leader (it could not renew, or another took the Lease). */
  follow(): void;
}

export class LeaderLease {
  readonly identity: string;
  readonly name: string;
  private readonly durationMs: number;
  private readonly api: CoordinationV1Api;
  private leading = false;
  private lastRenewed = 0;
  /** The Lease as last seen, and when (on this clock) it was last seen to change. */
  private observed?: { key: string; at: number };
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private closed = false;
  private lastFailure?: string;

  constructor(
    private readonly cluster: Cluster,
    private readonly leadership: Leadership,
    private readonly log: HostLog,
    options: LeaderLeaseOptions = {},
  ) {
    this.durationMs = (options.durationSeconds ?? DEFAULT_LEASE_SECONDS) * 1000;
    this.name = options.name ?? LEADER_LEASE;
    this.identity = options.identity ?? `${hostname()}_${process.pid}_${randomBytes(3).toString("hex")}`;
    this.api = cluster.config.makeApiClient(CoordinationV1Api);
  }

  get isLeader() {
    return this.leading;
  }

  /** Tries once at once, then every third of the duration. */
  async start() {
    await this.tick();
  }

  /** Stops trying; a leader gives the Lease up so that another takes over at once. */
  async close() {
    this.closed = true;
    clearTimeout(this.timer);
    await this.running;
    if (!this.leading) return;
    this.setLeading(false);
    try {
      const lease = await this.read();
      if (lease?.spec?.holderIdentity === this.identity) {
        const { acquireTime } = lease.spec;
        lease.spec = {
          ...lease.spec,
          ...(acquireTime && { acquireTime: new V1MicroTime(acquireTime) }),
          renewTime: new V1MicroTime(),
          holderIdentity: undefined,
          leaseDurationSeconds: 1,
        };
        await this.api.replaceNamespacedLease({
          name: this.name,
          namespace: this.cluster.namespace,
          body: lease,
        });
      }
    } catch {
      // Not given up: the others take it once it expires.
    }
  }

  private async tick() {
    this.running = this.attempt();
    await this.running;
    if (this.closed) return;
    this.timer = setTimeout(() => void this.tick(), Math.max(100, this.durationMs / 3));
    this.timer.unref();
  }

  private async attempt() {
    try {
      const won = await this.acquireOrRenew();
      if (won) this.lastRenewed = Date.now();
      if (this.lastFailure) {
        this.lastFailure = undefined;
        await this.log.info("The leader Lease can be read and written again", { lease: this.name });
      }
      if (won) this.setLeading(true);
      else if (this.leading) this.setLeading(false); // another holds it now
    } catch (err) {
      const message = statusCode(err) === undefined ? (err as Error).message : apiMessage(err);
      if (message !== this.lastFailure) {
        this.lastFailure = message;
        await this.log.error("Cannot read or write the leader Lease", { lease: this.name, error: message });
      }
    }
    // A leader that could not renew for two thirds of the duration steps down before it expires.
    if (this.leading && Date.now() - this.lastRenewed > (this.durationMs * 2) / 3) this.setLeading(false);
  }

  /** True when this replica holds the Lease after this attempt. */
  private async acquireOrRenew(): Promise<boolean> {
    const namespace = this.cluster.namespace;
    const now = new V1MicroTime();
    const seconds = Math.ceil(this.durationMs / 1000);
    const lease = await this.read();
    if (!lease) {
      try {
        await this.api.createNamespacedLease({
          namespace,
          body: {
            metadata: { name: this.name, labels: { [LABEL.managedBy]: MANAGER } },
            spec: {
              holderIdentity: this.identity,
              leaseDurationSeconds: seconds,
              acquireTime: now,
              renewTime: now,
              leaseTransitions: 0,
            },
          },
        });
        return true;
      } catch (err) {
        if (statusCode(err) === 409) return false; // another created it first
        throw err;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity;
    const key = `${holder}|${lease.metadata?.resourceVersion}`;
    if (this.observed?.key !== key) this.observed = { key, at: Date.now() };
    const mine = holder === this.identity;
    const heldFor = (spec.leaseDurationSeconds ?? seconds) * 1000;
    if (!mine && holder && Date.now() - this.observed.at < heldFor) return false;
    lease.spec = {
      ...spec,
      // Read back as plain dates; written again with the microseconds the API server expects.
      ...(spec.acquireTime && { acquireTime: new V1MicroTime(spec.acquireTime) }),
      holderIdentity: this.identity,
      leaseDurationSeconds: seconds,
      renewTime: now,
      ...(!mine && { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }),
    };
    try {
      await this.api.replaceNamespacedLease({ name: this.name, namespace, body: lease });
      return true;
    } catch (err) {
      if (statusCode(err) === 409) return false; // changed since read: another renewed or took it
      throw err;
    }
  }

  private async read(): Promise<V1Lease | undefined> {
    try {
      return await this.api.readNamespacedLease({ name: this.name, namespace: this.cluster.namespace });
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  private setLeading(leading: boolean) {
    if (leading === this.leading) return;
    this.leading = leading;
    void this.log.info(
      leading ? "This host service leads the pools" : "This host service no longer leads the pools",
      {
        lease: this.name,
        identity: this.identity,
      },
    );
    if (leading) this.leadership.lead();
    else this.leadership.follow();
  }
}
