/**
 * The pool logic alone, in milliseconds: the manager against a fake of the desktops (each desktop
 * a state in a map; starts held until the test lets them go) and a store in memory, on fake
 * timers. Claims, waits, ttl and keepalive, leases that wait while a desktop sleeps, and the
 * sizing: refill, standby asleep, starts on demand up to max, shrink, idle time. Everything the
 * real desktops add (engines, QEMU, readiness) is in test/host/pools.test.ts and pool-sleep.test.ts.
 */
import { availableParallelism } from "node:os";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { DesktopRecord } from "../desktops/desktop-record.js";
import type { HibernationCapability } from "../desktops/hibernation.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { Lifecycle } from "../sleep/lifecycle.js";
import type { PoolDesktops } from "./pool-context.js";
import { type Edit, EditingPoolStore } from "./pool-edits.js";
import { PoolManager } from "./pool-manager.js";
import type { PoolSnapshot } from "./pool-store.js";

class MemoryPoolStore extends EditingPoolStore {
  state: PoolSnapshot = { pools: [], members: [] };
  async load() {
    return structuredClone(this.state);
  }
  async close() {}
  protected async change<T>(edit: Edit<T>): Promise<T> {
    const copy = structuredClone(this.state);
    const result = edit(copy);
    this.state = copy;
    return result;
  }
}

type Status = "running" | "stopped" | "hibernated";

/** The desktops as the pools see them: made, run, asleep, removed; a start is ready when let go. */
class FakeDesktops implements PoolDesktops {
  readonly lifecycle = new Lifecycle();
  readonly defaultRuntime = "container" as const;
  readonly desktops = new Map<string, Status>();
  readonly calls: string[] = [];
  /** Looks at a desktop through the engine. */
  finds = 0;
  /** Starts wait until `letGo` while true. */
  hold = false;
  /**
   * Starts are slow as an engine's are: making a desktop waits until `letGo`, and meanwhile the
   * engine answers a look at any desktop only once it is done (as podman, busy making containers).
   */
  slowStarts = false;
  sleeps = true;
  /** Whether its records are the host's files (as QEMU's): a claim looks rather than asks. */
  localRecords = false;
  /** Desktops asked whether they answer. */
  asked = 0;
  /** Desktops that run but whose computer server no longer answers. */
  readonly mute = new Set<string>();
  private readonly held = new Map<string, () => void>();
  private making: Promise<void>[] = [];
  private readonly listeners: ((name: string) => void)[] = [];

  runtime() {
    const hibernation: HibernationCapability | undefined = this.sleeps ? { modes: ["memory"] } : undefined;
    return {
      kind: "container" as const,
      defaultImage: "desk:1",
      hasImage: async () => true,
      hibernation,
      snapshots: { running: "memory" as const },
      localRecords: this.localRecords,
    };
  }
  onChange(listener: (name: string) => void) {
    this.listeners.push(listener);
  }
  async find(name: string): Promise<DesktopRecord> {
    this.finds++;
    while (this.making.length > 0) await Promise.all(this.making);
    const status = this.desktops.get(name);
    if (!status) throw new HostError("not_found", `Virtual machine not found: ${name}`);
    return {
      name,
      status,
      runtime: "container",
      computerServerUrl: null,
      ready: status === "running",
    } as DesktopRecord;
  }
  async create(request: { name: string }) {
    if (this.slowStarts) {
      const made = new Promise<void>((resolve) => this.held.set(request.name, resolve));
      this.making.push(made);
      await made;
      this.making = this.making.filter((m) => m !== made);
    }
    this.desktops.set(request.name, "stopped");
    return { name: request.name, runtime: "container" as const };
  }
  async clone(request: { newName: string }) {
    this.desktops.set(request.newName, "stopped");
    return { name: request.newName, runtime: "container" as const };
  }
  async fork(_name: string, request: { names?: string[] }) {
    for (const name of request.names ?? []) this.desktops.set(name, "running");
    return request.names ?? [];
  }
  async listSnapshots() {
    return [];
  }
  async run(name: string) {
    this.desktops.set(name, "running");
    return this.find(name);
  }
  /** Whether the desktop's computer server answers (what a claim asks of a ready one). */
  async answers(record: DesktopRecord) {
    this.asked++;
    return this.desktops.get(record.name) === "running" && !this.mute.has(record.name);
  }
  async waitReady(name: string, _ms: number, signal?: AbortSignal): Promise<DesktopRecord> {
    if (this.hold) {
      await new Promise<void>((resolve, reject) => {
        this.held.set(name, resolve);
        signal?.addEventListener("abort", () => reject(new HostError("cancelled", "cancelled")));
      });
    }
    return this.find(name);
  }
  /** Lets every held start become ready. */
  letGo() {
    for (const [name, resolve] of this.held) {
      this.held.delete(name);
      resolve();
    }
  }
  async remove(name: string) {
    if (!this.desktops.delete(name)) throw new HostError("not_found", `Virtual machine not found: ${name}`);
    this.calls.push(`remove ${name}`);
  }
  async hibernate(name: string) {
    if (this.desktops.get(name) !== "running") throw new HostError("conflict", `${name} is not running`);
    this.desktops.set(name, "hibernated");
    this.calls.push(`hibernate ${name}`);
    this.lifecycle.emit({ type: "hibernated", name, runtime: "container", mode: "memory", ms: 1 });
  }
  async ensureAwake(name: string) {
    const woke = this.desktops.get(name) === "hibernated";
    if (woke) {
      this.desktops.set(name, "running");
      this.calls.push(`wake ${name}`);
      this.lifecycle.emit({ type: "woke", name, runtime: "container", ms: 1, why: "a test" });
    }
    return { record: await this.find(name), woke };
  }
  count(status: Status) {
    return [...this.desktops.values()].filter((s) => s === status).length;
  }
}

const log = { info: async () => undefined, error: async () => undefined } as unknown as HostLog;
let desktops: FakeDesktops;
let store: MemoryPoolStore;
let pools: PoolManager;

beforeEach(async () => {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "Date"] });
  desktops = new FakeDesktops();
  store = new MemoryPoolStore();
  pools = new PoolManager(desktops, store, log, {
    warmUp: false,
    checkIntervalMs: 3_600_000,
    answers: (record) => desktops.answers(record),
    maxStarting: 4,
  });
  await pools.start();
});
afterEach(async () => {
  await pools.close();
  vi.useRealTimers();
});

/** Lets the background work run (no timer moves; held starts stay held). */
const settle = async () => {
  for (let i = 0; i < 30; i++) await new Promise((resolve) => setImmediate(resolve));
};
const states = (name: string) =>
  pools
    .get(name)
    .desktops.map((d) => d.state)
    .sort();
const create = (body: Record<string, unknown>) =>
  pools.create({ name: "p", template: "desk:1", ...body } as Parameters<PoolManager["create"]>[0]);

describe("claims", () => {
  it("a start under way says in the pool's record what it waits for, and for how long", async () => {
    desktops.hold = true;
    await create({ size: 1 });
    await settle();
    vi.advanceTimersByTime(3000);
    const [starting] = pools.get("p").desktops;
    expect(starting).toMatchObject({
      state: "starting",
      startStep: "waiting for its computer server for 3 s",
    });
    desktops.letGo();
    await settle();
    expect(pools.get("p").desktops).toMatchObject([{ state: "ready", startStep: null }]);
  });

  it("a size pool refills to its size; a claim takes a ready desktop and the pool makes another", async () => {
    await create({ size: 2 });
    await settle();
    expect(states("p")).toEqual(["ready", "ready"]);
    const claimed = await pools.claim("p", { owner: "agent" });
    expect(claimed.claim.by).toBe("agent");
    await settle();
    expect(states("p")).toEqual(["claimed", "ready", "ready"]);
    expect(store.state.members.find((m) => m.name === claimed.name)?.state).toBe("claimed");
    await pools.release(claimed.name);
    await settle();
    expect(states("p")).toEqual(["ready", "ready"]);
    expect(desktops.calls).toEqual([`remove ${claimed.name}`]);
  });

  it("a claim waits for the next desktop, or answers 503 at once without wait", async () => {
    desktops.hold = true;
    await create({ size: 1 });
    await settle();
    await expect(pools.claim("p", { wait: false })).rejects.toThrow(
      /Pool p has no ready desktop now \(1 starting\)/,
    );
    const waiting = pools.claim("p", { timeout: 30 });
    await settle();
    desktops.letGo();
    const claimed = await waiting;
    expect(claimed.status).toBe("running");
    const late = pools.claim("p", { timeout: 5 });
    const refused = expect(late).rejects.toThrow(/had no ready desktop within 5 s/);
    await vi.advanceTimersByTimeAsync(5_000);
    await refused;
  });

  it("a ttl ends the claim; a keepalive renews it; releasing twice is a clear 400", async () => {
    await create({ size: 1, ttl: 10 });
    await settle();
    const { name } = await pools.claim("p");
    await vi.advanceTimersByTimeAsync(8_000);
    const renewed = await pools.keepalive("p", name);
    expect(Date.parse(renewed.claim.expiresAt ?? "")).toBe(Date.now() + 10_000);
    await vi.advanceTimersByTimeAsync(8_000);
    expect(desktops.desktops.get(name)).toBe("running");
    await vi.advanceTimersByTimeAsync(2_500);
    await settle();
    expect(desktops.desktops.has(name)).toBe(false);
    await expect(pools.release(name)).rejects.toThrow(
      `${name} is not a desktop of a pool: nothing to release`,
    );
    await expect(pools.keepalive("p", "nope")).rejects.toThrow(/No claim nope in pool p/);
  });

  it("time asleep does not count against a claim; onExpire hibernate keeps it, asleep", async () => {
    await create({ size: 1, ttl: 10, onExpire: "hibernate" });
    await settle();
    const { name } = await pools.claim("p");
    await vi.advanceTimersByTimeAsync(4_000);
    await desktops.hibernate(name);
    await settle();
    await vi.advanceTimersByTimeAsync(60_000);
    const asleep = pools.get("p").desktops.find((d) => d.name === name);
    expect(asleep).toMatchObject({ state: "claimed", expiresAt: null, leaseLeftMs: 6_000 });
    await desktops.ensureAwake(name);
    await settle();
    const awake = pools.get("p").desktops.find((d) => d.name === name);
    expect(Date.parse(awake?.expiresAt ?? "")).toBe(Date.now() + 6_000);
    // The lease runs out: the desktop is put to sleep, still claimed, not removed.
    await vi.advanceTimersByTimeAsync(6_500);
    await settle();
    expect(desktops.desktops.get(name)).toBe("hibernated");
    expect(pools.get("p").desktops.find((d) => d.name === name)?.state).toBe("claimed");
    // Woken again (it is used): a whole ttl.
    await desktops.ensureAwake(name);
    await settle();
    const again = pools.get("p").desktops.find((d) => d.name === name);
    expect(Date.parse(again?.expiresAt ?? "")).toBe(Date.now() + 10_000);
  });
});

describe("starts at once", () => {
  it("without maxStarting, a container pool starts as many at once as the host has CPUs (at least 2)", async () => {
    await pools.close();
    pools = new PoolManager(desktops, store, log, {
      warmUp: false,
      checkIntervalMs: 3_600_000,
      answers: (record) => desktops.answers(record),
    });
    await pools.start();
    desktops.hold = true;
    await create({ size: 8 });
    await settle();
    const atOnce = Math.min(8, Math.max(2, availableParallelism()));
    expect(states("p")).toEqual(Array(atOnce).fill("starting"));
    // Each start that ends lets the next begin.
    desktops.letGo();
    await settle();
    expect(states("p").filter((s) => s === "starting")).toHaveLength(Math.min(atOnce, 8 - atOnce));
  });
});

describe("claims behind refills", () => {
  it("a claim with a ready desktop is answered while the refills' starts are slow, and never looks through the busy engine", async () => {
    await create({ size: 3 });
    await settle();
    expect(states("p")).toEqual(["ready", "ready", "ready"]);
    desktops.slowStarts = true;
    desktops.finds = 0;
    // Each claim's replacement starts (and is held); the next claims are answered all the same.
    const first = await pools.claim("p", { wait: false });
    await settle();
    const second = await pools.claim("p", { wait: false });
    await settle();
    const third = await pools.claim("p", { wait: false });
    await settle();
    expect(new Set([first.name, second.name, third.name]).size).toBe(3);
    expect(states("p")).toEqual(["claimed", "claimed", "claimed", "starting", "starting", "starting"]);
    expect(desktops.finds).toBe(0);
    // None is ready: the next claim waits for the first start to end, whichever it is.
    const fourth = pools.claim("p", { timeout: 30 });
    await settle();
    desktops.slowStarts = false;
    desktops.letGo();
    const handed = await fourth;
    expect(handed.status).toBe("running");
    await settle();
    expect(states("p").filter((s) => s === "claimed")).toHaveLength(4);
  });

  it("a ready desktop that no longer answers is not handed out: the claim gets the next, it is replaced", async () => {
    await create({ size: 2 });
    await settle();
    const [oldest] = pools.get("p").desktops.map((d) => d.name);
    desktops.mute.add(oldest);
    const claimed = await pools.claim("p", { wait: false });
    expect(claimed.name).not.toBe(oldest);
    await settle();
    expect(desktops.desktops.has(oldest)).toBe(false);
    expect(states("p")).toEqual(["claimed", "ready", "ready"]);
  });
});

describe("claims of a runtime whose records are the host's files", () => {
  it("look at the desktop's record, and do not ask the desktop", async () => {
    desktops.localRecords = true;
    await create({ size: 2 });
    await settle();
    desktops.finds = 0;
    desktops.asked = 0;
    const claimed = await pools.claim("p", { wait: false });
    expect(claimed.status).toBe("running");
    expect(desktops.finds).toBeGreaterThan(0);
    expect(desktops.asked).toBe(0);
    // A stopped one is still not handed out: the look says so.
    await settle();
    const [next] = pools
      .get("p")
      .desktops.filter((d) => d.state === "ready")
      .map((d) => d.name);
    desktops.desktops.set(next, "stopped");
    const other = await pools.claim("p", { timeout: 30 });
    expect(other.name).not.toBe(next);
  });
});

describe("sizing", () => {
  it("keeps target awake and the rest of min asleep; a claim takes the ready one, the pool wakes one", async () => {
    await create({ min: 3, target: 1, max: 4 });
    await settle();
    expect(states("p")).toEqual(["hibernated", "hibernated", "ready"]);
    expect(desktops.count("hibernated")).toBe(2);
    await pools.claim("p");
    await settle();
    expect(states("p")).toEqual(["claimed", "hibernated", "hibernated", "ready"]);
    expect(desktops.calls.filter((c) => c.startsWith("wake"))).toHaveLength(1);
  });

  it("a claim wakes an asleep desktop when none is ready", async () => {
    await create({ min: 1, target: 0, max: 2 });
    await settle();
    expect(states("p")).toEqual(["hibernated"]);
    const claimed = await pools.claim("p", { wait: false });
    expect(claimed.status).toBe("running");
    expect(desktops.calls).toContain(`wake ${claimed.name}`);
  });

  it("with none kept, claims start desktops on demand up to max, and the next waits", async () => {
    desktops.hold = true;
    await create({ min: 0, target: 0, max: 2 });
    await settle();
    expect(states("p")).toEqual([]);
    const first = pools.claim("p", { timeout: 60 });
    const second = pools.claim("p", { timeout: 60 });
    const third = pools.claim("p", { timeout: 60 });
    await settle();
    expect(states("p")).toEqual(["starting", "starting"]);
    desktops.letGo();
    await Promise.all([first, second]);
    await settle();
    expect(states("p")).toEqual(["claimed", "claimed", "starting"]);
    desktops.letGo();
    expect((await third).pool).toBe("p");
  });

  it("shrinks on a smaller size, and keeps desktops beyond the target only until idle", async () => {
    await create({ size: 3 });
    await settle();
    await pools.update("p", { size: 1 });
    await settle();
    expect(states("p")).toEqual(["ready"]);

    await pools.update("p", { min: 0, max: 3, target: 1, idleTimeout: 60 });
    desktops.sleeps = false;
    const a = await pools.claim("p");
    await pools.claim("p"); // started on demand
    await pools.release(a.name);
    await settle();
    await pools.update("p", { target: 0 });
    await settle();
    expect(states("p")).toEqual(["claimed", "ready"]);
    await vi.advanceTimersByTimeAsync(61_000);
    await settle();
    expect(states("p")).toEqual(["claimed"]);
  });

  it("refuses min or target above max, and changes nothing", async () => {
    await create({ size: 2 });
    await expect(pools.update("p", { min: 5 })).rejects.toThrow("min (5) is more than max (2)");
    await expect(pools.update("p", { target: 3, max: 2 })).rejects.toThrow("target (3) is more than max (2)");
    await expect(create({ name: "q", min: 2, max: 1 })).rejects.toThrow("min (2) is more than max (1)");
    expect(pools.get("p")).toMatchObject({ min: 2, max: 2, target: 2 });
    expect(store.state.pools.map((p) => p.name)).toEqual(["p"]);
  });
});
