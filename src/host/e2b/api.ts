/**
 * E2B's control plane as the `e2b` SDK calls it (REST + JSON, `X-API-Key`; e2b-dev/infra's
 * `spec/openapi.yml`): create, list, get, kill, timeout, refresh, connect, pause, resume, logs and
 * metrics of sandboxes. Every failure is `{"code", "message"}` with E2B's status (errors.ts).
 */
import { Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { z } from "zod";
import type { KeyDigests } from "../../common/key-digests.js";
import type { DesktopService } from "../desktops/desktop-service.js";
import { jsonBody } from "../routes/body.js";
import { ENVD_VERSION, envdMetrics } from "./envd.js";
import { E2bError, e2bAnswer } from "./errors.js";
import {
  connectSchema,
  networkUpdateSchema,
  newSandboxSchema,
  pauseSchema,
  refreshSchema,
  resumeSchema,
  type SandboxState,
  sandboxStates,
  timeoutSchema,
} from "./requests.js";
import type { SandboxRecord } from "./sandbox-store.js";
import { addressOf, type ListQuery, type Sandboxes, type SandboxView } from "./sandboxes.js";

export interface E2bApiOptions {
  sandboxes: Sandboxes;
  vms: DesktopService;
  keys: KeyDigests;
  /** What sandboxes' per-port host names end with (`domain` in E2B's answers). */
  domain: () => string;
}

const MAX_PAGE = 100;
/** E2B's deprecated `clientID`: the node a sandbox runs on, here always this host. */
const CLIENT_ID = "hangar";

export function e2bApi(options: E2bApiOptions) {
  const { sandboxes, vms } = options;
  const app = new Hono({ strict: false });
  app.use(apiKeyAuth(options.keys));
  app.use(
    bodyLimit({
      maxSize: 1024 * 1024,
      onError: (c) => c.json({ code: 413, message: "Request body too large: the limit is 1 MiB" }, 413),
    }),
  );

  const sandbox = (view: SandboxView) => sandboxJson(view.record, options.domain());
  const detail = (view: SandboxView) => ({
    ...listedJson(view),
    domain: options.domain(),
    ...tokens(view.record),
  });

  app.post("/sandboxes", async (c) => {
    const body = await jsonBody(c, newSandboxSchema, { required: true });
    return c.json(sandbox(await sandboxes.create(body, "v1", c.req.raw.signal)), 201);
  });
  app.post("/v2/sandboxes", async (c) => {
    const body = await jsonBody(c, newSandboxSchema, { required: true });
    return c.json(sandbox(await sandboxes.create(body, "v2", c.req.raw.signal)), 201);
  });

  app.get("/sandboxes", async (c) => {
    const { page } = await sandboxes.list({
      metadata: metadataQuery(c.req.query("metadata")),
      states: ["running"],
      order: "desc",
      limit: Number.MAX_SAFE_INTEGER,
    });
    return c.json(page.map(listedJson));
  });
  app.get("/v2/sandboxes", async (c) => {
    const query = listQuery(c.req.query.bind(c.req));
    const { page, next, running } = await sandboxes.list(query);
    if (next)
      c.header(
        "X-Next-Token",
        Buffer.from(JSON.stringify([next.startedAt, next.sandboxID])).toString("base64url"),
      );
    if (!query.states || query.states.includes("running")) c.header("X-Total-Running", String(running));
    return c.json(page.map(listedJson));
  });

  app.get("/sandboxes/:id", async (c) => c.json(detail(await sandboxes.view(c.req.param("id")))));
  app.delete("/sandboxes/:id", async (c) => {
    await sandboxes.kill(c.req.param("id"));
    return c.body(null, 204);
  });
  app.post("/sandboxes/:id/timeout", async (c) => {
    const body = await jsonBody(c, timeoutSchema, { required: true });
    await sandboxes.setTimeout(c.req.param("id"), body.timeout);
    return c.body(null, 204);
  });
  app.post("/sandboxes/:id/refreshes", async (c) => {
    const body = await jsonBody(c, refreshSchema);
    await sandboxes.refresh(c.req.param("id"), body.duration);
    return c.body(null, 204);
  });
  app.put("/sandboxes/:id/network", async (c) => {
    const body = await jsonBody(c, networkUpdateSchema, { required: true });
    await sandboxes.updateNetwork(c.req.param("id"), body, body.allow_internet_access);
    return c.body(null, 204);
  });
  app.post("/sandboxes/:id/pause", async (c) => {
    const body = await jsonBody(c, pauseSchema);
    await sandboxes.pause(c.req.param("id"), body.memory !== false);
    return c.body(null, 204);
  });
  app.post("/sandboxes/:id/resume", async (c) => {
    const body = await jsonBody(c, resumeSchema);
    const view = await sandboxes.resume(c.req.param("id"), body.timeout ?? 15, "resume");
    return c.json(sandbox(view), 201);
  });
  for (const path of ["/sandboxes/:id/connect", "/v2/sandboxes/:id/connect"]) {
    app.post(path, async (c) => {
      const body = await jsonBody(c, connectSchema);
      const view = await sandboxes.connect(c.req.param("id") ?? "", body.timeout ?? 300);
      return c.json(sandbox(view), view.resumed ? 201 : 200);
    });
  }

  app.get("/sandboxes/:id/logs", async (c) => {
    const view = await sandboxes.view(c.req.param("id"));
    const limit = intQuery(c.req.query("limit"), "limit", 1000);
    const start = intQuery(c.req.query("start"), "start", 0);
    const entries = (await logEntries(vms, view, limit)).filter((e) => Date.parse(e.timestamp) >= start);
    return c.json({
      logs: entries.map((e) => ({ timestamp: e.timestamp, line: e.message })),
      logEntries: entries,
    });
  });
  app.get("/v2/sandboxes/:id/logs", async (c) => {
    const view = await sandboxes.view(c.req.param("id"));
    const limit = intQuery(c.req.query("limit"), "limit", 1000);
    const cursor = intQuery(c.req.query("cursor"), "cursor", 0);
    const search = c.req.query("search");
    const level = c.req.query("level");
    const levels = ["debug", "info", "warn", "error"];
    if (level !== undefined && !levels.includes(level)) {
      throw new E2bError(400, `Invalid query parameter level: expected ${levels.join(", ")}`);
    }
    let entries = (await logEntries(vms, view, 10_000)).filter(
      (e) =>
        Date.parse(e.timestamp) >= cursor &&
        (search === undefined || e.message.includes(search)) &&
        (level === undefined || levels.indexOf(e.level) >= levels.indexOf(level)),
    );
    if (c.req.query("direction") === "backward") entries = entries.reverse();
    return c.json({ logs: entries.slice(0, limit) });
  });

  app.get("/sandboxes/:id/metrics", async (c) => {
    const view = await sandboxes.view(c.req.param("id"));
    const metric = await metricOf(view);
    return c.json(metric ? [metric] : []);
  });

  app.notFound((c) =>
    c.json(
      {
        code: 404,
        message: `Not found: ${c.req.method} ${c.req.path} (this Hangar host serves E2B's sandbox API; templates, snapshots, volumes and secrets are not part of it)`,
      },
      404,
    ),
  );
  app.onError((err, c) => {
    const { code, message } = e2bAnswer(err);
    return c.json({ code, message }, code as 400);
  });
  return app;
}

/** `X-API-Key` on every route, compared in constant time; E2B's 401 otherwise. The key is never logged. */
function apiKeyAuth(keys: KeyDigests): MiddlewareHandler {
  return async (c, next) => {
    const given = c.req.header("x-api-key");
    if (!given) {
      return c.json(
        { code: 401, message: "Missing X-API-Key header: send the host's E2B API key (E2B_API_KEY)" },
        401,
      );
    }
    if (!keys.matches(given)) return c.json({ code: 401, message: "Invalid API key" }, 401);
    return next();
  };
}

/** E2B's `Sandbox`: what create, connect and resume answer. */
function sandboxJson(record: SandboxRecord, domain: string) {
  return {
    sandboxID: record.sandboxID,
    templateID: record.templateID,
    alias: record.templateID,
    clientID: CLIENT_ID,
    envdVersion: ENVD_VERSION,
    domain,
    ...tokens(record),
  };
}

function tokens(record: SandboxRecord) {
  return {
    ...(record.envdAccessToken && { envdAccessToken: record.envdAccessToken }),
    ...(record.trafficAccessToken && { trafficAccessToken: record.trafficAccessToken }),
  };
}

/** E2B's `ListedSandbox` (and the base of `SandboxDetail`). */
function listedJson({ record, vm }: SandboxView) {
  return {
    sandboxID: record.sandboxID,
    templateID: record.templateID,
    alias: record.templateID,
    clientID: CLIENT_ID,
    cpuCount: vm.cpuCount,
    memoryMB: Math.round(vm.memorySize / 1024 ** 2),
    diskSizeMB: Math.round((vm.diskSize?.total ?? 0) / 1024 ** 2),
    startedAt: record.startedAt,
    endAt: record.endAt,
    envdVersion: ENVD_VERSION,
    metadata: record.metadata,
    state: record.state,
    allowInternetAccess: record.egress?.allowInternetAccess ?? null,
    network: {
      allowPublicTraffic: record.trafficAccessToken === null,
      ...(record.maskRequestHost && { maskRequestHost: record.maskRequestHost }),
      ...(record.egress && { allowOut: record.egress.allowOut, denyOut: record.egress.denyOut }),
    },
    lifecycle: { onTimeout: record.onTimeout, autoResume: record.autoResume },
    volumeMounts: [],
  };
}

/** `metadata=user%3Dabc%26app%3Dprod`: pairs whose keys and values are each URL-encoded once more. */
function metadataQuery(text: string | undefined): Record<string, string> | undefined {
  if (text === undefined || text === "") return undefined;
  const pairs: Record<string, string> = {};
  try {
    for (const [key, value] of new URLSearchParams(text))
      pairs[decodeURIComponent(key)] = decodeURIComponent(value);
  } catch {
    throw new E2bError(
      400,
      `Invalid metadata query '${text}': expected key=value pairs joined by &, URL-encoded`,
    );
  }
  return pairs;
}

const orderSchema = z.enum(["asc", "desc"], { error: "expected asc or desc" });

function listQuery(query: (name: string) => string | undefined): ListQuery {
  const states = query("state")
    ?.split(",")
    .filter(Boolean)
    .map((state) => {
      if (!sandboxStates.includes(state as SandboxState)) {
        throw new E2bError(400, `Invalid state '${state}': expected ${sandboxStates.join(" or ")}`);
      }
      return state as SandboxState;
    });
  const order = orderSchema.safeParse(query("order") ?? "desc");
  if (!order.success) throw new E2bError(400, `Invalid order '${query("order")}': expected asc or desc`);
  const limit = intQuery(query("limit"), "limit", MAX_PAGE);
  if (limit < 1 || limit > MAX_PAGE)
    throw new E2bError(400, `Invalid limit ${limit}: expected 1 to ${MAX_PAGE}`);
  const startedAfter = query("startedAfter");
  const after = query("nextToken");
  return {
    metadata: metadataQuery(query("metadata")),
    states: states?.length ? states : undefined,
    template: query("template") || undefined,
    startedAfter: startedAfter === undefined ? undefined : timeQuery(startedAfter),
    order: order.data,
    limit,
    after: after ? cursorOf(after) : undefined,
  };
}

function cursorOf(token: string): { startedAt: string; sandboxID: string } {
  try {
    const [startedAt, sandboxID] = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as [
      string,
      string,
    ];
    if (typeof startedAt === "string" && typeof sandboxID === "string") return { startedAt, sandboxID };
  } catch {
    // refused below
  }
  throw new E2bError(400, "Invalid nextToken: pass the X-Next-Token of the previous page as it was");
}

function timeQuery(text: string): number {
  const time = Date.parse(text);
  if (Number.isNaN(time))
    throw new E2bError(400, `Invalid startedAfter '${text}': expected an RFC 3339 time`);
  return time;
}

function intQuery(text: string | undefined, name: string, fallback: number): number {
  if (text === undefined || text === "") return fallback;
  if (!/^\d+$/.test(text))
    throw new E2bError(400, `Invalid query parameter ${name}: expected a whole number`);
  return Number(text);
}

interface LogEntry {
  timestamp: string;
  level: "debug" | "info" | "warn" | "error";
  message: string;
  fields: Record<string, string>;
}

/**
 * The last `limit` lines of the desktop's console (a container's or Pod's output, a VM's serial
 * port). The computer server's own lines are JSON (pino): their time, level and message are
 * taken; any other line is an `info` line stamped with the sandbox's start.
 */
async function logEntries(vms: DesktopService, view: SandboxView, limit: number): Promise<LogEntry[]> {
  const controller = new AbortController();
  const stream = await vms.logs(view.record.desktop, {
    lines: limit,
    follow: false,
    signal: controller.signal,
  });
  let text = "";
  for await (const chunk of stream) {
    text += chunk.toString();
    if (text.length > 16 * 1024 * 1024) break;
  }
  controller.abort();
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .slice(-limit)
    .map(
      (line) =>
        pinoEntry(line) ?? { timestamp: view.record.startedAt, level: "info", message: line, fields: {} },
    );
}

const PINO_LEVELS: Record<number, LogEntry["level"]> = {
  10: "debug",
  20: "debug",
  30: "info",
  40: "warn",
  50: "error",
  60: "error",
};

function pinoEntry(line: string): LogEntry | undefined {
  if (!line.startsWith("{")) return undefined;
  try {
    const { time, level, msg, ...rest } = JSON.parse(line) as Record<string, unknown>;
    if (typeof time !== "number" || typeof msg !== "string") return undefined;
    const fields = Object.fromEntries(
      Object.entries(rest).map(([key, value]) => [
        key,
        typeof value === "string" ? value : JSON.stringify(value),
      ]),
    );
    return {
      timestamp: new Date(time).toISOString(),
      level: PINO_LEVELS[Number(level)] ?? "info",
      message: msg,
      fields,
    };
  } catch {
    return undefined;
  }
}

/** One sample of the sandbox's use, as its envd measures it; none without envd. */
async function metricOf(view: SandboxView) {
  if (view.record.state !== "running") return undefined;
  const m = await envdMetrics(addressOf(view.vm), view.record.envdAccessToken ?? undefined);
  if (!m) return undefined;
  const at = new Date((m.ts ?? Date.now() / 1000) * 1000);
  return {
    timestamp: at.toISOString(),
    timestampUnix: Math.floor(at.getTime() / 1000),
    cpuCount: m.cpu_count ?? view.vm.cpuCount,
    cpuUsedPct: m.cpu_used_pct ?? 0,
    memUsed: m.mem_used ?? 0,
    memTotal: m.mem_total ?? 0,
    memCache: m.mem_cache ?? 0,
    diskUsed: m.disk_used ?? 0,
    diskTotal: m.disk_total ?? 0,
  };
}
