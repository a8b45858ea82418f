/**
 * E2B sandboxes as Hangar desktops. A sandbox is a desktop of any runtime (templates.ts says which
 * one a `templateID` makes or claims), plus what `SandboxStore` keeps: its metadata, the
 * environment and token handed to its envd, its per-port token, its lease and its state.
 *
 * The lease: a sandbox claimed from a pool that is killed at its timeout has the pool's claim as
 * its lease (`setTimeout` renews the claim, the pool removes the desktop when it runs out); any
 * other has a timer here, armed again after a restart, that kills it (or pauses it, `autoPause`).
 * A desktop that vanishes (killed from outside, removed by its pool) takes its sandbox with it:
 * the next look at it, or the runtime's change event, forgets the record, and the sandbox is E2B's
 * 404 from then on.
 */
import { randomBytes } from "node:crypto";
import type { DesktopRecord, DesktopService } from "../desktops/desktop-service.js";
import type { EgressService } from "../egress/egress-service.js";
import type { NetworkPolicy } from "../egress/policy.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { KeyedLock } from "../keyed-lock.js";
import type { PoolManager } from "../pools/pool-manager.js";
import type { PoolSpec } from "../pools/pool-types.js";
import { initEnvd } from "./envd.js";
import { E2bError, sandboxNotFound } from "./errors.js";
import { egressPolicy } from "./network.js";
import type { Pauser } from "./pause.js";
import {
  DEFAULT_TIMEOUT_SECONDS,
  MAX_TIMEOUT_SECONDS,
  type NewSandboxRequest,
  type SandboxState,
} from "./requests.js";
import type { SandboxRecord, SandboxStore } from "./sandbox-store.js";
import type { TemplateSource, Templates } from "./templates.js";
import type { DesktopAddress } from "./tunnel.js";

export interface SandboxesOptions {
  /** The sizes of a desktop made for a sandbox (a clone keeps its template's). */
  spec: PoolSpec;
  /** How long a new desktop may take to answer (default 10 min). */
  readyTimeoutMs?: number;
  /** How long envd may take to listen once the desktop answers (default 5 s). */
  envdWaitMs?: number;
  /** How long a create waits for a pool's next desktop when none is ready (default 120 s). */
  claimWaitSeconds?: number;
}

/** A sandbox and its desktop's record. */
export interface SandboxView {
  record: SandboxRecord;
  vm: DesktopRecord;
}

export interface ListQuery {
  metadata?: Record<string, string>;
  states?: SandboxState[];
  template?: string;
  startedAfter?: number;
  order: "asc" | "desc";
  limit: number;
  /** The last sandbox of the previous page (`X-Next-Token`). */
  after?: { startedAt: string; sandboxID: string };
}

const DESKTOP_PREFIX = "e2b-";

export class Sandboxes {
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly locks = new KeyedLock();
  /** Sandboxes being paused or resumed: a stopped desktop is expected meanwhile. */
  private readonly busy = new Set<string>();
  private readonly goneListeners: ((sandboxID: string) => void)[] = [];
  private closed = false;

  constructor(
    private readonly vms: DesktopService,
    private readonly pools: PoolManager,
    private readonly store: SandboxStore,
    private readonly templates: Templates,
    private readonly pauser: Pauser,
    private readonly egress: EgressService,
    private readonly log: HostLog,
    private readonly options: SandboxesOptions,
  ) {
    vms.onChange((name) => {
      const record = this.store.ofDesktop(name);
      if (record && record.state === "running") void this.view(record.sandboxID).catch(() => undefined);
    });
  }

  /** Loads the sandboxes, removes what a killed service left half-made, and arms the leases. */
  async start() {
    for (const record of await this.store.load()) {
      if (record.state === "creating") {
        await this.log.info("Removing a sandbox a stopped service left half-made", {
          sandbox: record.sandboxID,
          vm: record.desktop,
        });
        await this.destroy(record).catch((err: Error) =>
          this.log.error("Cannot remove a half-made sandbox", {
            sandbox: record.sandboxID,
            error: err.message,
          }),
        );
      } else {
        this.arm(record);
      }
    }
  }

  async close() {
    this.closed = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await this.store.close();
  }

  /** Calls `listener` with a sandbox's id once it is gone (killed, expired, vanished). */
  onGone(listener: (sandboxID: string) => void) {
    this.goneListeners.push(listener);
  }

  // ---- creating ----

  /** Makes (or claims) the sandbox's desktop; a client that goes away meanwhile (`signal`) leaves nothing behind. */
  async create(body: NewSandboxRequest, version: "v1" | "v2", signal?: AbortSignal): Promise<SandboxView> {
    refuseUnsupported(body);
    const network = egressPolicy(body.network, body.allow_internet_access);
    // A restricted network is the desktop's from its making: no claim (a pool's desktops have theirs).
    const resolved = await this.templates.resolve(body.templateID);
    const source = network ? this.templates.made(resolved) : resolved;
    const onTimeout = body.autoPause ? "pause" : "kill";
    const autoResume = body.autoResume?.enabled === true;
    if (autoResume && onTimeout !== "pause") {
      throw new E2bError(400, "autoResume needs autoPause: only a paused sandbox can be resumed by traffic");
    }
    const pauseKeepsMemory = body.autoPauseMemory !== false;
    if (body.autoPauseMemory === false && onTimeout !== "pause") {
      throw new E2bError(400, "autoPauseMemory=false only applies when autoPause is true.");
    }
    if (onTimeout === "pause") {
      const refusal = this.pauser.refusal(source.runtime, pauseKeepsMemory);
      if (refusal) throw new E2bError(400, `autoPause: ${refusal}`);
    }
    const timeoutSeconds = body.timeout ?? DEFAULT_TIMEOUT_SECONDS[version];
    const secure = version === "v2" || body.secure === true;
    const now = new Date().toISOString();
    const sandboxID = newSandboxID();
    const record: SandboxRecord = {
      sandboxID,
      desktop: `${DESKTOP_PREFIX}${sandboxID}`,
      templateID: body.templateID,
      pool: source.kind === "pool" ? source.pool : null,
      metadata: body.metadata ?? {},
      envVars: body.envVars ?? {},
      envdAccessToken: secure ? newToken() : null,
      trafficAccessToken: body.network?.allowPublicTraffic === true ? null : newToken(),
      maskRequestHost: body.network?.maskRequestHost ?? null,
      egress: egressOf(body.network, body.allow_internet_access),
      startedAt: now,
      endAt: new Date(Date.now() + timeoutSeconds * 1000).toISOString(),
      timeoutSeconds,
      state: "creating",
      onTimeout,
      pauseKeepsMemory,
      autoResume,
    };
    const started = Date.now();
    let vm: DesktopRecord;
    if (source.kind === "pool") {
      // The claim is the lease (or, for a sandbox paused at its timeout, a week-long backstop).
      const claimed = await this.pools.claim(
        source.pool,
        {
          owner: `e2b sandbox ${sandboxID}`,
          ttl: onTimeout === "kill" ? Math.max(1, timeoutSeconds) : MAX_TIMEOUT_SECONDS,
          timeout: this.options.claimWaitSeconds ?? 120,
        },
        signal,
      );
      record.desktop = claimed.name;
      vm = claimed;
    } else {
      // Recorded before it is made: a service killed meanwhile removes it at its next start.
      await this.store.put(record);
      try {
        vm = await this.makeDesktop(record.desktop, source, network, signal);
      } catch (err) {
        await this.destroy(record).catch(() => undefined);
        throw err;
      }
    }
    try {
      signal?.throwIfAborted();
      await this.initEnvd(record, vm);
      const ready = new Date().toISOString();
      record.state = "running";
      record.startedAt = ready;
      record.endAt = new Date(Date.parse(ready) + timeoutSeconds * 1000).toISOString();
      await this.store.put(record);
    } catch (err) {
      await this.destroy(record).catch(() => undefined);
      throw err;
    }
    this.arm(record);
    await this.log.info("E2B sandbox created", {
      sandbox: sandboxID,
      template: body.templateID,
      vm: record.desktop,
      pool: record.pool ?? undefined,
      ms: Date.now() - started,
    });
    return { record, vm };
  }

  private async makeDesktop(
    name: string,
    source: Exclude<TemplateSource, { kind: "pool" }>,
    network: NetworkPolicy | undefined,
    signal?: AbortSignal,
  ): Promise<DesktopRecord> {
    if (source.kind === "desktop") {
      await this.vms.clone({ name: source.name, newName: name });
      // A clone has its template's cage, if any: the sandbox's policy replaces its policy.
      if (network) await this.egress.change(name, source.runtime, network);
    } else {
      await this.vms.create({
        name,
        runtime: source.runtime,
        image: source.image,
        os: "linux",
        ...this.options.spec,
        ...(network && { network }),
      });
    }
    signal?.throwIfAborted();
    await this.vms.run(name, {});
    return this.vms.waitReady(name, this.options.readyTimeoutMs ?? 600_000, signal);
  }

  /** Hands envd the sandbox's environment and token (E2B's `/init`); a desktop without envd is said so in the log. */
  private async initEnvd(record: SandboxRecord, vm: DesktopRecord) {
    const address = addressOf(vm);
    const answered = await initEnvd(
      address,
      { envVars: record.envVars, accessToken: record.envdAccessToken ?? undefined },
      this.options.envdWaitMs ?? 5000,
    );
    if (!answered) {
      await this.log.info(
        "The sandbox's desktop has no envd (its image predates it): E2B's SDK can manage it but not run commands in it",
        {
          sandbox: record.sandboxID,
          vm: record.desktop,
        },
      );
    }
  }

  // ---- reading ----

  /** The sandbox and its desktop; E2B's 404 when either is gone (a vanished desktop's record is forgotten). */
  async view(sandboxID: string): Promise<SandboxView> {
    const record = this.store.get(sandboxID);
    if (!record || record.state === "creating") throw sandboxNotFound(sandboxID);
    const vm = await this.vms.find(record.desktop).catch((err) => {
      if (err instanceof HostError && err.kind === "not_found") return undefined;
      throw err;
    });
    if (!this.gone(record, vm)) return { record, vm: vm as DesktopRecord };
    // Killed or stopped from outside: the sandbox is over. Not waited for: a caller may hold its lock.
    void this.locks
      .run(sandboxID, async () => {
        const now = this.store.get(sandboxID);
        if (!now || now.state === "creating" || !this.gone(now, vm)) return;
        await this.log.info("E2B sandbox gone: its desktop was removed or stopped from outside", {
          sandbox: sandboxID,
          vm: record.desktop,
        });
        await this.destroy(now, Boolean(vm));
      })
      .catch((err: Error) =>
        this.log.error("Cannot remove a sandbox whose desktop went", {
          sandbox: sandboxID,
          error: err.message,
        }),
      );
    throw sandboxNotFound(sandboxID);
  }

  /**
   * Whether a sandbox's desktop is gone: removed, or stopped while the sandbox runs (killed from
   * outside). A desktop being paused or resumed here, or kept asleep by its runtime, is not.
   */
  private gone(record: SandboxRecord, vm: DesktopRecord | undefined): boolean {
    if (!vm) return true;
    return record.state === "running" && vm.status === "stopped" && !this.busy.has(record.sandboxID);
  }

  /** The sandboxes that match, one page of them, newest first unless asked otherwise. */
  async list(query: ListQuery): Promise<{ page: SandboxView[]; next?: SandboxRecord; running: number }> {
    const vms = new Map((await this.vms.list()).map((vm) => [vm.name, vm]));
    const views: SandboxView[] = [];
    for (const record of this.store.all()) {
      if (record.state === "creating") continue;
      const vm = vms.get(record.desktop);
      if (this.gone(record, vm)) {
        void this.view(record.sandboxID).catch(() => undefined); // forgets it
        continue;
      }
      if (!matches(record, query)) continue;
      views.push({ record, vm: vm as DesktopRecord });
    }
    const sign = query.order === "asc" ? 1 : -1;
    views.sort((a, b) => sign * compareByStart(a.record, b.record));
    const after = query.after;
    const rest = after ? views.filter((v) => sign * compareByStart(v.record, after) > 0) : views;
    const page = rest.slice(0, query.limit);
    const running = views.filter((v) => v.record.state === "running").length;
    return { page, next: rest.length > page.length ? page.at(-1)?.record : undefined, running };
  }

  /** Where a sandbox's ports are reached, for the router; a paused one with `autoResume` is resumed first. */
  async route(sandboxID: string): Promise<{ record: SandboxRecord; address: DesktopAddress }> {
    let { record, vm } = await this.view(sandboxID);
    if (record.state === "paused") {
      if (!record.autoResume)
        throw new E2bError(502, `Sandbox ${sandboxID} is paused: connect to it to resume it`);
      // As E2B's: a sandbox woken by traffic gets at least the default timeout.
      ({ record, vm } = await this.resume(
        sandboxID,
        Math.max(record.timeoutSeconds, DEFAULT_TIMEOUT_SECONDS.v2),
        "connect",
      ));
    }
    return { record, address: addressOf(vm) };
  }

  // ---- changing ----

  async kill(sandboxID: string) {
    await this.locks.run(sandboxID, async () => {
      const record = this.store.get(sandboxID);
      if (!record || record.state === "creating") throw sandboxNotFound(sandboxID);
      await this.destroy(record);
      await this.log.info("E2B sandbox killed", { sandbox: sandboxID, vm: record.desktop });
    });
  }

  /** The sandbox ends `seconds` from now (E2B's `setTimeout`: shorter or longer than before). */
  async setTimeout(sandboxID: string, seconds: number) {
    await this.locks.run(sandboxID, async () => {
      const { record } = await this.view(sandboxID);
      await this.renew(record, new Date(Date.now() + seconds * 1000));
    });
  }

  /** Keeps the sandbox alive at least `seconds` more (E2B's refresh; default its own timeout). */
  async refresh(sandboxID: string, seconds?: number) {
    await this.locks.run(sandboxID, async () => {
      const { record } = await this.view(sandboxID);
      const wanted = Date.now() + (seconds ?? record.timeoutSeconds) * 1000;
      if (wanted > Date.parse(record.endAt)) await this.renew(record, new Date(wanted));
    });
  }

  /**
   * E2B's connect: a running sandbox's lease is only lengthened (to `seconds` from now); a paused
   * one is resumed. `resumed` says which.
   */
  async connect(sandboxID: string, seconds: number): Promise<SandboxView & { resumed: boolean }> {
    const { record } = await this.view(sandboxID);
    if (record.state === "paused")
      return { ...(await this.resume(sandboxID, seconds, "connect")), resumed: true };
    await this.refresh(sandboxID, seconds);
    return { ...(await this.view(sandboxID)), resumed: false };
  }

  /**
   * E2B's pause: its memory and processes kept unless `keepMemory` is false (its files only);
   * 409 when it is paused already, 400 where the runtime cannot keep what is asked.
   */
  async pause(sandboxID: string, keepMemory = true) {
    await this.locks.run(sandboxID, async () => {
      const { record, vm } = await this.view(sandboxID);
      if (record.state === "paused") throw new E2bError(409, `Sandbox "${sandboxID}" is already paused`);
      const refusal = this.pauser.refusal(vm.runtime, keepMemory);
      if (refusal) throw new E2bError(400, refusal);
      await this.pauseNow(record, vm, keepMemory);
    });
  }

  /**
   * E2B's network update: the sandbox's egress is now what `network` says (omitted fields
   * cleared). Only a sandbox made with a restricted network has a cage to change.
   */
  async updateNetwork(sandboxID: string, network: Parameters<typeof egressPolicy>[0], internet?: boolean) {
    await this.locks.run(sandboxID, async () => {
      const { record, vm } = await this.view(sandboxID);
      const policy = egressPolicy(network, internet) ?? { egress: "allow" };
      await this.egress.change(record.desktop, vm.runtime, policy);
      await this.store.update(sandboxID, (r) => ({ ...r, egress: egressOf(network, internet) }));
      await this.log.info("E2B sandbox network changed", {
        sandbox: sandboxID,
        egress: JSON.stringify(policy.egress),
      });
    });
  }

  /**
   * Resumes a paused sandbox with a new lease of `seconds`. `mode` says what a running one is:
   * the same sandbox for connect, E2B's 409 for the older `resume`.
   */
  async resume(sandboxID: string, seconds: number, mode: "connect" | "resume"): Promise<SandboxView> {
    return this.locks.run(sandboxID, async () => {
      let { record, vm } = await this.view(sandboxID);
      if (record.state === "running") {
        if (mode === "resume") throw new E2bError(409, `Sandbox "${sandboxID}" is already running`);
        return { record, vm };
      }
      this.busy.add(sandboxID);
      try {
        await this.pauser.resume(record.desktop);
        vm = await this.vms.waitReady(record.desktop, this.options.readyTimeoutMs ?? 600_000);
        await this.initEnvd(record, vm);
      } finally {
        this.busy.delete(sandboxID);
      }
      const endAt = new Date(Date.now() + seconds * 1000).toISOString();
      const resumed = await this.store.update(sandboxID, (r) => ({ ...r, state: "running", endAt }));
      if (!resumed) throw sandboxNotFound(sandboxID);
      // A pool's claim is its lease again (it was stretched while the sandbox slept).
      if (leaseIsClaim(resumed))
        await this.pools.keepalive(resumed.pool as string, resumed.desktop, { ttl: seconds });
      this.arm(resumed);
      await this.log.info("E2B sandbox resumed", { sandbox: sandboxID, vm: record.desktop });
      return { record: resumed, vm };
    });
  }

  // ---- leases ----

  private async renew(record: SandboxRecord, endAt: Date) {
    if (leaseIsClaim(record) && record.state === "running") {
      const ttl = Math.max(1, Math.ceil((endAt.getTime() - Date.now()) / 1000));
      await this.pools.keepalive(record.pool as string, record.desktop, { ttl });
    }
    const renewed = await this.store.update(record.sandboxID, (r) => ({ ...r, endAt: endAt.toISOString() }));
    if (renewed) this.arm(renewed);
  }

  /** The timer of a lease kept here (not a pool's claim), from the record's `endAt`. */
  private arm(record: SandboxRecord) {
    clearTimeout(this.timers.get(record.sandboxID));
    this.timers.delete(record.sandboxID);
    if (this.closed || record.state !== "running" || leaseIsClaim(record)) return;
    const ms = Math.min(Math.max(0, Date.parse(record.endAt) - Date.now()), 2 ** 31 - 1);
    const timer = setTimeout(() => void this.expire(record.sandboxID), ms);
    timer.unref();
    this.timers.set(record.sandboxID, timer);
  }

  private async expire(sandboxID: string) {
    this.timers.delete(sandboxID);
    await this.locks
      .run(sandboxID, async () => {
        const record = this.store.get(sandboxID);
        if (record?.state !== "running" || this.closed) return;
        if (Date.parse(record.endAt) > Date.now()) return this.arm(record);
        const vm = await this.vms.find(record.desktop).catch(() => undefined);
        if (record.onTimeout === "pause" && vm && !this.pauser.refusal(vm.runtime, record.pauseKeepsMemory)) {
          await this.log.info("E2B sandbox timed out: paused", { sandbox: sandboxID, vm: record.desktop });
          await this.pauseNow(record, vm, record.pauseKeepsMemory);
        } else {
          await this.log.info("E2B sandbox timed out: killed", { sandbox: sandboxID, vm: record.desktop });
          await this.destroy(record, Boolean(vm));
        }
      })
      .catch((err: Error) =>
        this.log.error("E2B sandbox timeout failed; tried again in a minute", {
          sandbox: sandboxID,
          error: err.message,
        }),
      )
      .then(() => {
        // Still there and running after a failure: the timer is armed again, a minute later.
        const record = this.store.get(sandboxID);
        if (
          record?.state === "running" &&
          !this.timers.has(sandboxID) &&
          !this.closed &&
          !leaseIsClaim(record)
        ) {
          const timer = setTimeout(() => void this.expire(sandboxID), 60_000);
          timer.unref();
          this.timers.set(sandboxID, timer);
        }
      });
  }

  private async pauseNow(record: SandboxRecord, vm: DesktopRecord, keepMemory: boolean) {
    // A paused sandbox does not expire: a pool's claim, its lease, is stretched to the longest.
    if (record.pool !== null) {
      await this.pools.keepalive(record.pool, record.desktop, { ttl: MAX_TIMEOUT_SECONDS });
    }
    this.busy.add(record.sandboxID);
    try {
      await this.pauser.pause(record.desktop, vm.runtime, keepMemory);
    } finally {
      this.busy.delete(record.sandboxID);
    }
    clearTimeout(this.timers.get(record.sandboxID));
    this.timers.delete(record.sandboxID);
    await this.store.update(record.sandboxID, (r) => ({ ...r, state: "paused" }));
    await this.log.info("E2B sandbox paused", { sandbox: record.sandboxID, vm: record.desktop });
  }

  /** Removes the sandbox's desktop (its pool's claim released) and its record. */
  private async destroy(record: SandboxRecord, desktopExists = true) {
    clearTimeout(this.timers.get(record.sandboxID));
    this.timers.delete(record.sandboxID);
    if (desktopExists) {
      const released = record.pool
        ? await this.pools.release(record.desktop).then(
            () => true,
            () => false,
          )
        : false;
      if (!released) {
        await this.vms.remove(record.desktop).catch((err) => {
          if (!(err instanceof HostError && err.kind === "not_found")) throw err;
        });
      }
    }
    await this.store.remove(record.sandboxID);
    for (const listener of this.goneListeners) listener(record.sandboxID);
  }
}

/** The E2B network options kept on the record (what `getInfo` shows), or null when none restrict. */
function egressOf(network: { allowOut?: string[]; denyOut?: string[] } | undefined, internet?: boolean) {
  if (!network?.allowOut?.length && !network?.denyOut?.length && internet === undefined) return null;
  return {
    allowOut: network?.allowOut ?? [],
    denyOut: network?.denyOut ?? [],
    allowInternetAccess: internet ?? null,
  };
}

/** The desktop's computer server, where its tunnel is. */
export function addressOf(vm: DesktopRecord): DesktopAddress {
  if (!vm.computerServerUrl) {
    throw new E2bError(502, `The sandbox's desktop ${vm.name} does not answer: it is not running`);
  }
  return { name: vm.name, computerServerUrl: vm.computerServerUrl, apiKey: vm.apiKey };
}

/** A sandbox claimed from a pool and killed at its timeout: the claim is its lease. */
function leaseIsClaim(record: SandboxRecord): boolean {
  return record.pool !== null && record.onTimeout === "kill";
}

/** E2B's form: `i` and 20 lower-case letters and digits (the per-port host names carry it). */
function newSandboxID(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  const bytes = randomBytes(20);
  return `i${[...bytes].map((b) => alphabet[b % alphabet.length]).join("")}`;
}

function newToken(): string {
  return randomBytes(24).toString("base64url");
}

function matches(record: SandboxRecord, query: ListQuery): boolean {
  if (query.states && !query.states.includes(record.state as SandboxState)) return false;
  if (query.template !== undefined && record.templateID !== query.template) return false;
  if (query.startedAfter !== undefined && Date.parse(record.startedAt) < query.startedAfter) return false;
  for (const [key, value] of Object.entries(query.metadata ?? {})) {
    if (record.metadata[key] !== value) return false;
  }
  return true;
}

function compareByStart(
  a: { startedAt: string; sandboxID: string },
  b: { startedAt: string; sandboxID: string },
) {
  return Date.parse(a.startedAt) - Date.parse(b.startedAt) || a.sandboxID.localeCompare(b.sandboxID);
}

/**
 * What a create asks and this host cannot do is refused by name, before anything is made:
 * egress rules, volumes, MCP and workload identity have no counterpart here yet.
 */
function refuseUnsupported(body: NewSandboxRequest) {
  const refuse = (what: string) => {
    throw new E2bError(400, `${what} is not supported by this Hangar host`);
  };
  if (body.network?.httpsPorts?.length) refuse("network.httpsPorts (services that serve TLS themselves)");
  if (body.volumeMounts?.length) refuse("volumeMounts");
  if (body.mcp !== undefined && body.mcp !== null) refuse("mcp (the MCP gateway)");
  if (body.iam?.tokens && Object.keys(body.iam.tokens).length > 0) refuse("iam (workload identity tokens)");
}
