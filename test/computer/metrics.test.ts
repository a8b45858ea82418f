/**
 * `GET /metrics` of the computer server, scraped over real HTTP and parsed as Prometheus' text
 * format: commands counted by command, transport (`http` for /cmd) and outcome from the first scrape on, failures by
 * code, durations, the process's own metrics; a foreign page is refused as on every route.
 */
import parsePrometheus from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer } from "../support/server.js";

let server: Awaited<ReturnType<typeof startTestServer>>;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

interface Family {
  name: string;
  type: string;
  metrics: { labels?: Record<string, string>; value?: string; buckets?: Record<string, string> }[];
}

async function scrape(headers: Record<string, string> = {}) {
  const res = await fetch(`${server.url}/metrics`, { headers });
  const text = await res.text();
  if (res.status !== 200) return { res, families: new Map<string, Family>() };
  return { res, families: new Map((parsePrometheus(text) as Family[]).map((f) => [f.name, f])) };
}

describe("GET /metrics", () => {
  it("counts the commands run after the first scrape, by outcome, with failures by code", async () => {
    const first = await scrape();
    expect(first.res.status).toBe(200);
    expect(first.res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(first.families.get("hangar_server_process_resident_memory_bytes")?.type).toBe("GAUGE");

    for (let i = 0; i < 3; i++) expect((await server.cmd("version")).event.success).toBe(true);
    const failed = await server.cmd("run_command", { command: "true", no_such_param: 1 });
    expect(failed.event).toMatchObject({ success: false, code: "invalid_params" });

    const { families } = await scrape();
    const commands = families.get("hangar_commands_total");
    expect(commands?.type).toBe("COUNTER");
    const count = (command: string, outcome: string) =>
      Number(
        commands?.metrics.find(
          (m) =>
            m.labels?.command === command && m.labels?.outcome === outcome && m.labels?.transport === "http",
        )?.value ?? 0,
      );
    expect(count("version", "success")).toBe(3);
    expect(count("run_command", "failure")).toBe(1);
    const failures = families.get("hangar_command_failures_total");
    expect(failures?.metrics).toContainEqual({
      labels: { command: "run_command", code: "invalid_params" },
      value: "1",
    });
    const durations = families.get("hangar_command_duration_seconds");
    expect(durations?.type).toBe("HISTOGRAM");
  });

  it("refuses a foreign page", async () => {
    const { res } = await scrape({ origin: "https://evil.example" });
    expect(res.status).toBe(403);
  });
});
