/**
 * The host service's Prometheus metrics (`GET /metrics`, prom-client's text format): desktops by
 * state and runtime and the pools' members by state, read from the services when scraped; claims,
 * resumes and starts to ready as histograms, and every lifecycle event and failure as counters,
 * from the lifecycle events (events.ts). The process's own metrics (CPU, memory, descriptors, event
 * loop lag) come with prom-client's defaults, prefixed `hangar_host_`.
 */
import type { Hono } from "hono";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { LifecycleEvents } from "./events.js";
import type { HostServices } from "./services.js";

/** Seconds: claims are milliseconds, resumes about a second, cold starts up to minutes. */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180];

export function hostMetrics(services: Pick<HostServices, "vms" | "pools">, events: LifecycleEvents) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "hangar_host_" });

  new Gauge({
    name: "hangar_desktops",
    help: "Desktops by runtime and status",
    labelNames: ["runtime", "status"] as const,
    registers: [registry],
    async collect() {
      this.reset();
      for (const record of await services.vms.list().catch(() => [])) {
        this.inc({ runtime: record.runtime, status: record.status });
      }
    },
  });
  new Gauge({
    name: "hangar_pool_desktops",
    help: "A pool's members by state (ready, starting, claimed)",
    labelNames: ["pool", "state"] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const pool of services.pools.list()) {
        this.set({ pool: pool.name, state: "ready" }, pool.ready);
        this.set({ pool: pool.name, state: "starting" }, pool.starting);
        this.set({ pool: pool.name, state: "claimed" }, pool.claimed);
      }
    },
  });
  const lifecycle = new Counter({
    name: "hangar_lifecycle_events_total",
    help: "Lifecycle events by type and runtime",
    labelNames: ["type", "runtime"] as const,
    registers: [registry],
  });
  const failures = new Counter({
    name: "hangar_failures_total",
    help: "Failed desktop operations (starts, claims, hibernations, resumes) by runtime",
    labelNames: ["runtime"] as const,
    registers: [registry],
  });
  const latency = {
    claim: new Histogram({
      name: "hangar_claim_duration_seconds",
      help: "From a claim's request to the desktop handed out",
      labelNames: ["pool"] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    resume: new Histogram({
      name: "hangar_resume_duration_seconds",
      help: "From a resume's request to the desktop running again",
      labelNames: ["runtime"] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    ready: new Histogram({
      name: "hangar_start_to_ready_seconds",
      help: "From a desktop's start to its computer server answering",
      labelNames: ["runtime"] as const,
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
  };
  const unsubscribe = events.subscribe((event) => {
    const runtime = event.runtime ?? "";
    lifecycle.inc({ type: event.type, runtime });
    if (event.type === "failure") failures.inc({ runtime });
    if (event.ms === undefined) return;
    const seconds = event.ms / 1000;
    if (event.type === "claim") latency.claim.observe({ pool: event.pool ?? "" }, seconds);
    if (event.type === "resume") latency.resume.observe({ runtime }, seconds);
    if (event.type === "ready") latency.ready.observe({ runtime }, seconds);
  });
  return { registry, close: unsubscribe };
}

/** `GET /metrics`: the exposition, behind the same origin policy and token as every other route. */
export function metricsRoutes(app: Hono, registry: Registry) {
  app.get("/metrics", async (c) =>
    c.body(await registry.metrics(), 200, { "content-type": registry.contentType }),
  );
}
