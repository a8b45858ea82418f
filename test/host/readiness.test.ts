/**
 * Readiness: a running desktop is ready once its computer server answers `GET /status`. The
 * computer server here is a real HTTP server on loopback that starts answering when the test says.
 */
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ReadinessTracker } from "../../src/host/desktops/readiness.js";
import type { RuntimeRecord } from "../../src/host/desktops/runtime.js";

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

/** A computer server stand-in whose /status answers 503 until `open()`. */
async function statusServer() {
  let open = false;
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    res.writeHead(open && req.url === "/status" ? 200 : 503, { "content-type": "application/json" });
    res.end('{"status":"ok"}');
  });
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    open: () => {
      open = true;
    },
    requests: () => requests,
  };
}

function record(url: string | null, overrides: Partial<RuntimeRecord> = {}): RuntimeRecord {
  return {
    name: "desk",
    runtime: "container",
    status: "running",
    startedAt: new Date(Date.now() - 500).toISOString(),
    computerServerUrl: url,
    ...overrides,
  } as RuntimeRecord;
}

describe("readiness", () => {
  it("is false until the computer server answers, then ready with the time it took", async () => {
    const server = await statusServer();
    const desk = record(server.url);
    const tracker = new ReadinessTracker(async () => desk);
    expect(tracker.of(desk)).toEqual({ ready: false, readyAt: null, startMs: null });
    await vi.waitFor(() => expect(server.requests()).toBeGreaterThan(1), { timeout: 10_000 });
    expect(tracker.of(desk).ready).toBe(false);

    const changed = tracker.next(AbortSignal.timeout(10_000));
    server.open();
    await changed;
    const ready = tracker.of(desk);
    expect(ready.ready).toBe(true);
    expect(ready.startMs).toBeGreaterThanOrEqual(500);
    expect(Date.parse(ready.readyAt as string)).toBeLessThanOrEqual(Date.now());
    // Ready is kept: no more probes once it answered.
    const seen = server.requests();
    expect(tracker.of(desk).ready).toBe(true);
    expect(server.requests()).toBe(seen);
    tracker.close();
  });

  it("starts over when the desktop stops or starts again, and stops probing a stopped one", async () => {
    const server = await statusServer();
    server.open();
    let desk = record(server.url);
    const tracker = new ReadinessTracker(async () => desk);
    tracker.of(desk);
    await vi.waitFor(() => expect(tracker.of(desk).ready).toBe(true), { timeout: 10_000 });

    desk = record(server.url, { status: "stopped", startedAt: null });
    expect(tracker.of(desk)).toEqual({ ready: false, readyAt: null, startMs: null });
    desk = record(server.url, { startedAt: new Date().toISOString() });
    expect(tracker.of(desk).ready).toBe(false);
    await vi.waitFor(() => expect(tracker.of(desk).ready).toBe(true), { timeout: 10_000 });
    tracker.close();
  });

  it("takes the runtime's own word when it gives one (a Pod's readiness)", async () => {
    const tracker = new ReadinessTracker(async () => undefined);
    const starting = record(null, { ready: false });
    expect(tracker.of(starting).ready).toBe(false);
    const ready = tracker.of({ ...starting, ready: true });
    expect(ready.ready).toBe(true);
    expect(ready.startMs).toBeGreaterThanOrEqual(500);
    tracker.close();
  });

  it("gives up on a desktop that stopped while it was probed", async () => {
    const server = await statusServer();
    let desk: RuntimeRecord | undefined = record(server.url);
    let gone!: () => void;
    const looked = new Promise<void>((resolve) => {
      gone = resolve;
    });
    const tracker = new ReadinessTracker(async () => {
      if (!desk) gone();
      return desk;
    });
    tracker.of(desk);
    await vi.waitFor(() => expect(server.requests()).toBeGreaterThan(0), { timeout: 10_000 });
    desk = undefined; // removed behind the tracker's back: the loop reads the record every 2 s
    await looked;
    const after = server.requests();
    // A second desktop's probes are the clock: ten of them, and the first has sent nothing more.
    const other = await statusServer();
    const watcher = new ReadinessTracker(async (r) => r);
    watcher.of(record(other.url, { name: "other" }));
    await vi.waitFor(() => expect(other.requests()).toBeGreaterThanOrEqual(10), { timeout: 10_000 });
    expect(server.requests()).toBe(after);
    watcher.close();
    tracker.close();
  });

  it("goes on probing when a look at the record fails (an engine slow under load)", async () => {
    const server = await statusServer();
    const desk = record(server.url);
    let failed!: () => void;
    const lookFailed = new Promise<void>((resolve) => {
      failed = resolve;
    });
    const tracker = new ReadinessTracker(async () => {
      failed();
      throw new Error("podman inspect timed out");
    });
    tracker.of(desk);
    await lookFailed; // the loop read the record (after 2 s of probes), and that failed
    const ready = tracker.next(AbortSignal.timeout(10_000), "desk");
    server.open();
    await ready;
    expect(tracker.of(desk).ready).toBe(true);
    tracker.close();
  });

  it("tells whoever waits when a probe ends unanswered, so that they look again", async () => {
    const server = await statusServer();
    const desk = record(server.url);
    // The runtime now says the desktop started again (another start time): this probe ends.
    const tracker = new ReadinessTracker(async () => ({ ...desk, startedAt: new Date().toISOString() }));
    const stop = new AbortController();
    let told = false;
    const waiting = tracker.next(stop.signal, "desk").then(() => {
      told = !stop.signal.aborted;
    });
    tracker.of(desk);
    const deadline = setTimeout(() => stop.abort(), 10_000);
    await waiting;
    clearTimeout(deadline);
    expect(told).toBe(true);
    expect(tracker.of(desk).ready).toBe(false);
    tracker.close();
  });

  it("stops probing a desktop going to sleep at once, the request in flight included", async () => {
    // A computer server that never answers: the probe is in flight when the desktop goes to sleep.
    const held: { closed: Promise<unknown> }[] = [];
    const silent = createServer((req) => held.push({ closed: once(req.socket, "close") }));
    servers.push(silent);
    silent.listen(0, "127.0.0.1");
    await once(silent, "listening");
    const desk = record(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`);
    const tracker = new ReadinessTracker(async () => desk);
    tracker.of(desk);
    await vi.waitFor(() => expect(held).toHaveLength(1), { timeout: 10_000 });

    tracker.stopProbing("other-desk");
    tracker.stopProbing("desk");
    await held[0].closed;
    // Ten probes of another desktop are the clock: the sleeping one got nothing more meanwhile.
    const other = await statusServer();
    const watcher = new ReadinessTracker(async (r) => r);
    watcher.of(record(other.url, { name: "other" }));
    await vi.waitFor(() => expect(other.requests()).toBeGreaterThanOrEqual(10), { timeout: 10_000 });
    expect(held).toHaveLength(1);
    watcher.close();
    tracker.close();
  });

  it("wakes a wait for one desktop at its own change or a change of all, not at the others'", async () => {
    const tracker = new ReadinessTracker(async (r) => r);
    const stop = new AbortController();
    let woken = 0;
    const wait = () =>
      tracker.next(stop.signal, "desk").then(() => {
        woken++;
      });
    let waiting = wait();
    for (let i = 0; i < 5; i++) tracker.notify(`other-${i}`);
    await new Promise((r) => setImmediate(r));
    expect(woken).toBe(0);
    tracker.notify("desk");
    await waiting;
    expect(woken).toBe(1);
    waiting = wait();
    tracker.notify();
    await waiting;
    // A desktop that becomes ready wakes the waits for it: its server answered.
    const server = await statusServer();
    const desk = record(server.url);
    waiting = wait();
    tracker.of(desk);
    server.open();
    await waiting;
    expect(tracker.of(desk).ready).toBe(true);
    // A wait for any desktop is woken by each.
    const any = tracker.next(stop.signal);
    tracker.notify("other-1");
    await any;
    stop.abort();
    tracker.close();
  });
});
