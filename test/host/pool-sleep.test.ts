/**
 * Pools that follow demand and pools filled from a memory snapshot, with real QEMU and the tiny
 * guest: members forked from a running VM's snapshot (they answer with its RAM, not a boot), a
 * standby kept asleep beyond the target, claims kept alive, a claim whose lease ran out put to
 * sleep and woken by a request to it (its lease then goes on), and bad input refused with 400s
 * that make nothing.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startTestHost, type TestHost } from "./support.js";
import { bootTinyGuest, guest, TINY_VM, tinyGuest } from "./tiny-guest.js";

let host: TestHost;

beforeAll(async () => {
  const guestDir = tinyGuest();
  host = await startTestHost({ pools: { checkIntervalMs: 500 } });
  expect((await host.api("POST", "/svc/vms", { name: "tiny", ...TINY_VM })).status).toBe(200);
  bootTinyGuest(join(host.home, "tiny"), guestDir);
  expect((await host.api("POST", "/svc/vms/tiny/run", {})).status).toBe(202);
  const ready = await host.api("GET", "/svc/vms/tiny?wait=ready&timeout=170");
  expect(ready.status, ready.text).toBe(200);
  for (let i = 0; i < 7; i++) await guest(ready.body.computerServerUrl, "/inc");
  expect((await host.api("POST", "/svc/vms/tiny/snapshots", { name: "warm" })).status).toBe(200);
}, 200_000);
afterAll(async () => {
  await host?.cleanup();
});

const pool = async (name: string) => (await host.api("GET", `/svc/pools/${name}`)).body;
const until = (name: string, check: (p: any) => boolean, timeout = 120_000) =>
  vi.waitFor(
    async () => {
      const p = await pool(name);
      if (!check(p))
        throw new Error(`${p.ready} ready, ${p.hibernated} asleep, ${p.starting} starting (${p.lastError})`);
      return p;
    },
    { timeout, interval: 200 },
  );

describe("a pool filled from a memory snapshot", () => {
  it("hands out forks of the running VM (its RAM, not a boot); a claim is kept alive", async () => {
    const created = await host.api("POST", "/svc/pools", {
      name: "snap",
      template: "tiny",
      fromSnapshot: "warm",
      size: 2,
      ttl: 30,
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({
      templateKind: "snapshot",
      template: "tiny",
      fromSnapshot: "warm",
      size: 2,
    });
    await until("snap", (p) => p.ready === 2);

    const started = Date.now();
    const claimed = await host.api("POST", "/svc/pools/snap/claim", { owner: "agent" });
    const claimMs = Date.now() - started;
    expect(claimed.status, claimed.text).toBe(200);
    expect(claimed.body).toMatchObject({
      pool: "snap",
      status: "running",
      restoredFrom: { vm: "tiny", snapshot: "warm" },
    });
    expect(claimMs).toBeLessThan(5_000);
    // The snapshot's RAM: the counter it had, not a fresh boot's 0.
    expect((await guest(claimed.body.computerServerUrl, "/status")).counter).toBe(7);

    const name = claimed.body.name as string;
    const kept = await host.api("POST", `/svc/pools/snap/claims/${name}/keepalive`, { ttl: 600 });
    expect(kept.status, kept.text).toBe(200);
    expect(kept.body.claim.ttlSeconds).toBe(600);
    expect(Math.abs(Date.parse(kept.body.claim.expiresAt) - (Date.now() + 600_000))).toBeLessThan(5_000);
    const again = await host.api("POST", `/svc/pools/snap/claims/${name}/keepalive`, {});
    expect(Date.parse(again.body.claim.expiresAt)).toBeGreaterThanOrEqual(
      Date.parse(kept.body.claim.expiresAt),
    );
    const unknown = await host.api("POST", "/svc/pools/snap/claims/nobody/keepalive", {});
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toBe("No claim nobody in pool snap: give the claimed desktop's name");
    expect((await host.api("POST", `/svc/vms/${name}/release`)).status).toBe(200);
    expect((await host.api("DELETE", "/svc/pools/snap")).status).toBe(200);
  }, 240_000);

  it("keeps the target awake and the rest of min asleep; an expired claim sleeps and wakes on a request", async () => {
    const created = await host.api("POST", "/svc/pools", {
      name: "follow",
      template: "tiny",
      fromSnapshot: "warm",
      min: 2,
      target: 1,
      max: 3,
      ttl: 2,
      onExpire: "hibernate",
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ min: 2, target: 1, max: 3, onExpire: "hibernate" });
    await until("follow", (p) => p.ready === 1 && p.hibernated === 1);

    const claimed = await host.api("POST", "/svc/pools/follow/claim", {});
    expect(claimed.status, claimed.text).toBe(200);
    const name = claimed.body.name as string;
    await guest(claimed.body.computerServerUrl, "/inc");
    // Its lease of 2 s runs out: it sleeps, still claimed, with no lease running.
    await vi.waitFor(
      async () => {
        if ((await host.api("GET", `/svc/vms/${name}`)).body.status !== "hibernated")
          throw new Error("awake");
      },
      { timeout: 60_000, interval: 200 },
    );
    // The pool hears of it from the desktops' lifecycle events once the hibernate has ended: a fork's
    // RAM is given a file of its own after the desktop already counts as asleep (qemu/ram-file.ts).
    await vi.waitFor(
      async () => {
        const asleep = (await pool("follow")).desktops.find((d: { name: string }) => d.name === name);
        expect(asleep).toMatchObject({ state: "claimed", expiresAt: null });
      },
      { timeout: 30_000, interval: 100 },
    );
    // The claimant comes back: its request wakes the desktop, with what it had, and the lease goes on.
    const res = await fetch(new URL("/status", claimed.body.computerServerUrl), {
      signal: AbortSignal.timeout(60_000),
    });
    expect(res.headers.get("x-hangar-woke")).toBe("1");
    expect(((await res.json()) as { counter: number }).counter).toBe(8);
    await vi.waitFor(
      async () => {
        const awake = (await pool("follow")).desktops.find((d: { name: string }) => d.name === name);
        if (!awake?.expiresAt) throw new Error("the lease did not go on");
      },
      { timeout: 10_000 },
    );
    // Meanwhile the pool woke its standby to be ready again and made a new one to sleep.
    await until("follow", (p) => p.ready === 1 && p.hibernated === 1 && p.claimed === 1);
    expect((await host.api("DELETE", "/svc/pools/follow")).status).toBe(200);
  }, 240_000);
});

describe("bad pool requests", () => {
  it("are 400s that name what is wrong, and make nothing", async () => {
    const before = (await host.api("GET", "/svc/vms")).body.length;
    const cases: [unknown, string][] = [
      [{ name: "a", template: "tiny", min: 3, max: 2 }, "Invalid request body: min: 3 is more than max (2)"],
      [
        { name: "a", template: "tiny", size: 1, idleTimeout: "0s" },
        'Invalid request body: idleTimeout: expected 1 second to 24 hours, not "0s"',
      ],
      [
        { name: "a", template: "tiny", size: 1, idleTimeout: -5 },
        "Invalid request body: idleTimeout: expected 1 second to 24 hours, not -5",
      ],
      [
        { name: "a", template: "tiny", size: 1, idleTimeout: "soon" },
        "Invalid request body: idleTimeout: 'soon' is not a duration: expected e.g. 300s, 5m or 1h",
      ],
      [
        { name: "a", template: "tiny", size: 1, max: 2 },
        "Invalid request body: size: give either size, or min, max and target, not both",
      ],
      [
        { name: "a", template: "tiny" },
        "Invalid request body: size: size is required (or max, with min and target)",
      ],
      [{ name: "a", template: "tiny", size: 1, fromSnapshot: "nope" }, "Snapshot not found: tiny/nope"],
      [
        { name: "a", template: "tiny", size: 1, fromSnapshot: "../x" },
        "Invalid snapshot name '../x': it contains a path separator",
      ],
      [
        { name: "a", size: 1, fromSnapshot: "warm" },
        "fromSnapshot needs a template that is a desktop with that snapshot",
      ],
      [
        { name: "a", template: "tiny", size: 1, onExpire: "explode" },
        "Invalid request body: onExpire: Unknown onExpire 'explode' (expected release or hibernate)",
      ],
    ];
    for (const [body, message] of cases) {
      const res = await host.api("POST", "/svc/pools", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.message).toBe(message);
    }
    expect(
      (await host.api("POST", "/svc/pools", { name: "ok", template: "tiny", fromSnapshot: "warm", size: 1 }))
        .status,
    ).toBe(201);
    const patch = await host.api("PATCH", "/svc/pools/ok", { min: 4 });
    expect(patch.status).toBe(400);
    expect(patch.body.message).toBe("min (4) is more than max (1)");
    expect((await pool("ok")).min).toBe(1);
    expect((await host.api("GET", "/svc/pools")).body.map((p: { name: string }) => p.name)).toEqual(["ok"]);
    expect((await host.api("DELETE", "/svc/pools/ok")).status).toBe(200);
    expect((await host.api("GET", "/svc/vms")).body.length).toBe(before);
  }, 120_000);
});
