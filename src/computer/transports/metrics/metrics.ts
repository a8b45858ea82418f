/**
 * The computer server's Prometheus metrics (`GET /metrics`): commands run, by command, transport
 * and outcome; their durations; failures by code; and the process's own (memory, CPU, descriptors,
 * event loop lag, prefixed `hangar_server_`). prom-client costs about 12 MB of memory, a fifth of an
 * idle server, so it is loaded at the first scrape and counting starts there (Prometheus reads a
 * counter that appears as one that started at zero).
 */
import type { Counter, Histogram, Registry } from "prom-client";
import type { CommandRun } from "../../core/activity.js";

/** Seconds: most commands take milliseconds, a screenshot tens of them, a shell command up to minutes. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120];

interface Loaded {
  registry: Registry;
  commands: Counter<"command" | "transport" | "outcome">;
  failures: Counter<"command" | "code">;
  durations: Histogram<"command">;
}

export class CommandMetrics {
  private loaded?: Loaded;
  private loading?: Promise<Loaded>;

  /** The registry's observer: a no-op until the first scrape. */
  observe(run: CommandRun) {
    const metrics = this.loaded;
    if (!metrics) return;
    const outcome = run.outcome.success ? "success" : "failure";
    metrics.commands.inc({ command: run.command, transport: run.transport, outcome });
    if (!run.outcome.success) metrics.failures.inc({ command: run.command, code: run.outcome.code });
    metrics.durations.observe({ command: run.command }, run.ms / 1000);
  }

  /** The exposition and its content type. */
  async scrape(): Promise<{ contentType: string; text: string }> {
    this.loading ??= this.load();
    const { registry } = await this.loading;
    return { contentType: registry.contentType, text: await registry.metrics() };
  }

  private async load(): Promise<Loaded> {
    const prom = await import("prom-client");
    const registry = new prom.Registry();
    prom.collectDefaultMetrics({ register: registry, prefix: "hangar_server_" });
    const loaded: Loaded = {
      registry,
      commands: new prom.Counter({
        name: "hangar_commands_total",
        help: "Commands run, by command, transport (api, ws, mcp, live, …) and outcome",
        labelNames: ["command", "transport", "outcome"],
        registers: [registry],
      }),
      failures: new prom.Counter({
        name: "hangar_command_failures_total",
        help: "Failed commands by command and error code",
        labelNames: ["command", "code"],
        registers: [registry],
      }),
      durations: new prom.Histogram({
        name: "hangar_command_duration_seconds",
        help: "How long commands took, queueing included",
        labelNames: ["command"],
        buckets: BUCKETS,
        registers: [registry],
      }),
    };
    this.loaded = loaded;
    return loaded;
  }
}
