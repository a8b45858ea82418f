/**
 * The pool store's file: changes asked at once (a claim behind the refills' writes) are all kept,
 * in the order asked, each refused one alone left out; a write that fails changes nothing; what is
 * on disk reads back as the state.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { FilePoolStore } from "./file-pool-store.js";
import type { PoolDefinition, PoolMember } from "./pool-types.js";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "hangar-pool-store-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const pool: PoolDefinition = {
  name: "p",
  runtime: "container",
  template: { kind: "image", image: "desk:1" },
  spec: { cpu: 1, memory: "1GB", diskSize: "4GB", display: "1280x800" },
  min: 4,
  max: 4,
  target: 4,
  ttlSeconds: null,
  onExpire: "release",
  idleTimeoutSeconds: null,
  createdAt: "2026-01-01T00:00:00.000Z",
};
const member = (name: string): PoolMember => ({
  name,
  pool: "p",
  state: "ready",
  createdAt: "2026-01-01T00:00:00.000Z",
  readyAt: "2026-01-01T00:00:01.000Z",
  claim: null,
});
const claimed = (m: PoolMember): PoolMember => ({
  ...m,
  state: "claimed",
  claim: { by: null, at: "2026-01-01T00:00:02.000Z", expiresAt: null },
});

it("keeps every change asked at once, in order; a refused one is left out alone", async () => {
  const file = join(dir, ".pools", "pools.json");
  const store = new FilePoolStore(file);
  await store.createPool(pool);
  const names = Array.from({ length: 12 }, (_, i) => `p-${i}`);
  // Added, then claimed, then one claimed twice (refused), asked without waiting for each other.
  const asked = [
    ...names.map((name) => store.addMember(member(name))),
    ...names.slice(0, 6).map((name) => store.updateMember(name, claimed)),
    store.updateMember("p-0", (m) => {
      if (m.state === "claimed") throw new Error("p-0 is claimed already");
      return claimed(m);
    }),
    store.removeMember("p-11"),
  ];
  const results = await Promise.allSettled(asked);
  expect(results.filter((r) => r.status === "rejected").map((r) => String(r.reason))).toEqual([
    "Error: p-0 is claimed already",
  ]);
  const onDisk = JSON.parse(readFileSync(file, "utf8"));
  const states = Object.fromEntries(onDisk.members.map((m: PoolMember) => [m.name, m.state]));
  expect(Object.keys(states)).toEqual(names.slice(0, 11));
  expect(Object.values(states)).toEqual([...Array(6).fill("claimed"), ...Array(5).fill("ready")]);
  expect((await new FilePoolStore(file).load()).members).toEqual(onDisk.members);
  await store.close();
});

it("a write that fails changes nothing, and the next one works", async () => {
  const home = join(dir, ".pools");
  const store = new FilePoolStore(join(home, "pools.json"));
  await store.createPool(pool);
  // A file where the directory should be: the writes fail.
  rmSync(home, { recursive: true });
  writeFileSync(home, "not a directory");
  const failed = await Promise.allSettled([store.addMember(member("p-0")), store.addMember(member("p-1"))]);
  expect(failed.map((r) => r.status)).toEqual(["rejected", "rejected"]);
  expect((await store.load()).members).toEqual([]);
  rmSync(home);
  await store.addMember(member("p-2"));
  expect((await store.load()).members.map((m) => m.name)).toEqual(["p-2"]);
  expect(JSON.parse(readFileSync(join(home, "pools.json"), "utf8")).members).toHaveLength(1);
  await store.close();
});

it("writes a change asked as the last write settles (by the code that awaited it)", async () => {
  const store = new FilePoolStore(join(dir, ".pools", "pools.json"));
  await store.createPool(pool);
  // Each change is asked by the code that awaited the one before, in the turn its write settled:
  // after the writer's last look at its queue. Before the fix the second of them was never written
  // (the pool waited on it for ever: a claimed desktop's lease ran out, a standby never woke).
  let chained: Promise<unknown> = Promise.resolve();
  for (let i = 0; i < 20; i++) {
    const name = `p-${i}`;
    chained = chained.then(() => store.addMember(member(name))).then(() => store.updateMember(name, claimed));
  }
  await chained;
  const members = (await store.load()).members;
  expect(members.map((m) => m.state)).toEqual(Array(20).fill("claimed"));
  await store.close();
}, 10_000);
