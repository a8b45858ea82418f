/**
 * What an operator watches, through a real engine (podman) and light desktops: the lifecycle event
 * stream (`GET /svc/events`, read by the `eventsource` client as a browser's EventSource would, and
 * resumed with Last-Event-ID), webhooks posted to a receiver on loopback (retried after a 503,
 * signed with the configured secret), and `GET /metrics` parsed as Prometheus' text format.
 */
import { createHmac } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { EventSource } from "eventsource";
import parsePrometheus from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { LIFECYCLE_TYPES } from "../../src/host/events.js";
import { makeLightImage, startPodman, type TestEngine, testUlimits } from "./podman.js";
import { LINUX_VM, startTestHost, type TestHost } from "./support.js";

let engine: TestEngine;
let host: TestHost;
let receiver: Server;
const posts: { headers: Record<string, string | string[] | undefined>; body: string }[] = [];
let refusedOnce = 0;
const SECRET = "webhook-secret-for-the-test";

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      // The first post is refused as a busy receiver would: the service must try it again.
      if (refusedOnce === 0) {
        refusedOnce++;
        res.writeHead(503).end();
        return;
      }
      posts.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  const { port } = receiver.address() as AddressInfo;
  engine = await startPodman();
  const light = await makeLightImage(engine, "localhost/hangar-light-events:test");
  host = await startTestHost({
    containerEngine: engine.address,
    desktopImage: light,
    containerUlimits: testUlimits(),
    defaultRuntime: "container",
    webhooks: { urls: [`http://127.0.0.1:${port}/hook`], secret: SECRET, baseDelayMs: 50 },
  });
}, 120_000);
afterAll(async () => {
  await host?.cleanup();
  await engine?.cleanup();
  await new Promise((resolve) => receiver?.close(resolve));
});

interface Event {
  id: number;
  type: string;
  desktop?: string;
  pool?: string;
  runtime?: string;
  ms?: number;
}

/** An EventSource on /svc/events that keeps what it receives. */
function watch(query = "", lastEventId?: string) {
  const received: Event[] = [];
  const source = new EventSource(`${host.url}/svc/events${query}`, {
    fetch: (url, init) =>
      fetch(url, {
        ...init,
        headers: { ...init?.headers, ...(lastEventId ? { "last-event-id": lastEventId } : {}) },
      }),
  });
  const opened = new Promise<void>((resolve, reject) => {
    source.onopen = () => resolve();
    source.onerror = (e) => reject(new Error(`event stream failed: ${e.message ?? e.code}`));
  });
  for (const type of LIFECYCLE_TYPES) {
    source.addEventListener(type, (message) => received.push(JSON.parse(message.data)));
  }
  return { source, received, opened };
}

function metrics(text: string) {
  const families = parsePrometheus(text) as {
    name: string;
    type: string;
    metrics: {
      labels?: Record<string, string>;
      value?: string;
      buckets?: Record<string, string>;
      count?: string;
    }[];
  }[];
  return new Map(families.map((family) => [family.name, family]));
}

describe("lifecycle events and metrics", () => {
  it("streams a pool's life as it happens, posts it to the webhook, and counts it in /metrics", async () => {
    const live = watch("?type=create,ready,claim,release,delete");
    await live.opened;

    expect((await host.api("POST", "/svc/pools", { name: "watched", size: 1 })).status).toBe(201);
    const claim = await host.api("POST", "/svc/pools/watched/claim", { timeout: 90 });
    expect(claim.status).toBe(200);
    const desktop = claim.body.name as string;
    expect((await host.api("POST", `/svc/vms/${desktop}/release`)).status).toBe(200);

    // Every step of the claimed desktop, in order, each once.
    await vi.waitFor(
      () => {
        const mine = live.received.filter((e) => e.desktop === desktop).map((e) => e.type);
        expect(mine).toEqual(["create", "ready", "claim", "release", "delete"]);
      },
      { timeout: 30_000, interval: 50 },
    );
    const claimed = live.received.find((e) => e.type === "claim" && e.desktop === desktop) as Event;
    expect(claimed).toMatchObject({ pool: "watched", runtime: "container" });
    expect(claimed.ms).toBeGreaterThanOrEqual(0);
    // The filter held: no run or stop events reached this client.
    expect(
      live.received.every((e) => ["create", "ready", "claim", "release", "delete"].includes(e.type)),
    ).toBe(true);
    live.source.close();

    // A client that reconnects with the last id it saw is given only what came after.
    const before = claimed.id;
    const resumed = watch("", String(before));
    await resumed.opened;
    await vi.waitFor(() => expect(resumed.received.map((e) => e.type)).toContain("delete"), {
      timeout: 10_000,
    });
    expect(resumed.received.every((e) => e.id > before)).toBe(true);
    expect(resumed.received[0]).toMatchObject({ type: "release", desktop });
    resumed.source.close();

    // The webhook: the claim arrived, in order after the create, signed, although the receiver refused once.
    await vi.waitFor(
      () => {
        const types = posts.map((p) => JSON.parse(p.body)).filter((e: Event) => e.desktop === desktop);
        expect(types.map((e: Event) => e.type)).toEqual(
          expect.arrayContaining(["create", "ready", "claim", "release", "delete"]),
        );
      },
      { timeout: 30_000, interval: 50 },
    );
    expect(refusedOnce).toBe(1);
    const ids = posts.map((p) => JSON.parse(p.body).id as number);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    for (const post of posts) {
      const expected = `sha256=${createHmac("sha256", SECRET).update(post.body).digest("hex")}`;
      expect(post.headers["x-hangar-signature"]).toBe(expected);
      expect(post.headers["content-type"]).toBe("application/json");
      expect(post.body).not.toContain(SECRET);
    }

    // /metrics: the claim's histogram, the events counted, the pool's members and the desktops by state.
    // The replacement's create is counted when its making starts, which a loaded machine may not
    // have reached yet: wait for it, then read the whole scrape.
    await vi.waitFor(
      async () => {
        const created = metrics(await (await fetch(`${host.url}/metrics`)).text())
          .get("hangar_lifecycle_events_total")
          ?.metrics.filter((m) => m.labels?.type === "create" && m.labels?.runtime === "container")
          .reduce((sum, m) => sum + Number(m.value), 0);
        expect(created).toBeGreaterThanOrEqual(2);
      },
      { timeout: 30_000, interval: 100 },
    );
    const scrape = await fetch(`${host.url}/metrics`);
    expect(scrape.status).toBe(200);
    expect(scrape.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const families = metrics(await scrape.text());
    const claims = families.get("hangar_claim_duration_seconds");
    expect(claims?.type).toBe("HISTOGRAM");
    // The parser folds a labelled histogram's series into one; this service has one pool, so the
    // `+Inf` bucket is the claims counted.
    expect(claims?.metrics).toHaveLength(1);
    expect(Number(claims?.metrics[0]?.buckets?.["+Inf"])).toBe(1);
    expect(Number(claims?.metrics[0]?.buckets?.["60"])).toBe(1);
    const events = families.get("hangar_lifecycle_events_total");
    const count = (type: string) =>
      events?.metrics
        .filter((m) => m.labels?.type === type && m.labels?.runtime === "container")
        .reduce((sum, m) => sum + Number(m.value), 0) ?? 0;
    expect(count("claim")).toBe(1);
    expect(count("release")).toBe(1);
    expect(count("create")).toBeGreaterThanOrEqual(2); // the claimed desktop and its replacement
    const pool = families.get("hangar_pool_desktops")?.metrics.filter((m) => m.labels?.pool === "watched");
    expect(pool?.map((m) => m.labels?.state).sort()).toEqual(["claimed", "ready", "starting"]);
    const desktops = families.get("hangar_desktops")?.metrics ?? [];
    expect(desktops.some((m) => m.labels?.runtime === "container" && Number(m.value) >= 1)).toBe(true);
    expect(families.get("hangar_host_process_resident_memory_bytes")?.type).toBe("GAUGE");

    expect((await host.api("DELETE", "/svc/pools/watched")).status).toBe(200);
  }, 180_000);

  it("streams a desktop's hibernation and resume, and times the resume in /metrics", async () => {
    const live = watch("?desktop=sleeper");
    await live.opened;
    expect(
      (await host.api("POST", "/svc/vms", { name: "sleeper", ...LINUX_VM, runtime: "container" })).status,
    ).toBe(200);
    expect((await host.api("POST", "/svc/vms/sleeper/run", {})).status).toBe(202);
    await vi.waitFor(() => expect(live.received.map((e) => e.type)).toContain("ready"), { timeout: 60_000 });
    const slept = await host.api("POST", "/svc/vms/sleeper/hibernate", {});
    expect(slept.status, JSON.stringify(slept.body)).toBe(200);
    const woke = await host.api("POST", "/svc/vms/sleeper/resume", {});
    expect(woke.status, JSON.stringify(woke.body)).toBe(200);
    await vi.waitFor(() => expect(live.received.map((e) => e.type)).toContain("resume"), { timeout: 30_000 });
    const hibernated = live.received.find((e) => e.type === "hibernate") as Event & { mode?: string };
    expect(hibernated).toMatchObject({ desktop: "sleeper", runtime: "container" });
    expect(hibernated.mode).toBe("paused"); // a container's default: the engine's freezer
    const resumed = live.received.find((e) => e.type === "resume") as Event;
    expect(resumed.id).toBeGreaterThan(hibernated.id);
    expect(resumed.ms).toBeGreaterThanOrEqual(0);
    live.source.close();

    const families = metrics(await (await fetch(`${host.url}/metrics`)).text());
    const resumes = families.get("hangar_resume_duration_seconds");
    expect(resumes?.type).toBe("HISTOGRAM");
    expect(Number(resumes?.metrics[0]?.buckets?.["+Inf"])).toBe(1);
    expect((await host.api("DELETE", "/svc/vms/sleeper")).status).toBe(200);
  }, 120_000);

  it("refuses a bad filter with a clear 400 and a foreign page on /svc/events and /metrics", async () => {
    const bad = await host.api("GET", "/svc/events?type=claim,explode");
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/type/);
    expect(bad.body.message).toMatch(/hibernate/); // the valid types are listed
    for (const path of ["/svc/events", "/metrics"]) {
      const foreign = await fetch(`${host.url}${path}`, { headers: { origin: "https://evil.example" } });
      expect(foreign.status).toBe(403);
      await foreign.body?.cancel();
    }
  });
});
