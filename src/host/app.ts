/**
 * The host service's HTTP surface: every /svc route (Hono), lume's shapes. Errors are
 * `{"message": "..."}` with 400 (invalid request, VM or location not found, failed operation);
 * an unknown route is a JSON 404. Query strings work on every route and trailing slashes are ignored.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { Hono, type MiddlewareHandler } from "hono";
import { bearerAuth } from "hono/bearer-auth";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import type { Registry } from "prom-client";
import { describeOsError } from "../common/errors.js";
import type { Logger } from "../common/logger.js";
import { OriginPolicy, originGuard } from "../common/origin-policy.js";
import { PACKAGE_VERSION } from "../common/version.js";
import { pageRoutes } from "../common/web-page.js";
import { HostError, HTTP_STATUS } from "./errors.js";
import { eventRoutes } from "./events.js";
import { metricsRoutes } from "./metrics.js";
import { acceleratorStatus } from "./qemu/accel.js";
import { configRoutes } from "./routes/config.js";
import { egressRoutes } from "./routes/egress.js";
import { imageRoutes } from "./routes/images.js";
import { ipswRoutes } from "./routes/ipsw.js";
import { logRoutes } from "./routes/logs.js";
import { poolRoutes } from "./routes/pools.js";
import { secretRoutes } from "./routes/secrets.js";
import { sleepRoutes } from "./routes/sleep.js";
import { snapshotRoutes } from "./routes/snapshots.js";
import { vmRoutes } from "./routes/vms.js";
import type { HostServices } from "./services.js";
import { vncRelay } from "./vnc-relay.js";
import { wallQuery, wallRelay } from "./wall-relay.js";

export interface HostAppOptions {
  log?: Logger;
  /** Which web pages may use the service (default: none, and only loopback names in `Host`). */
  originPolicy?: OriginPolicy;
  /** When set, every route needs `Authorization: Bearer <token>`. */
  token?: string;
  /** Served at `GET /metrics` when given (metrics.ts). */
  metrics?: Registry;
}

export function createHostApp(services: HostServices, options: HostAppOptions = {}) {
  const { log } = options;
  const app = new Hono({ strict: false });
  const policy = options.originPolicy ?? new OriginPolicy({ listenHost: "127.0.0.1" });
  app.use(
    originGuard(
      policy,
      (message) => ({ message }),
      (reason, headers) => log?.warn({ ...headers, reason }, "request from a browser refused"),
    ),
  );
  // The page and its assets hold no data: without the token it shows its login form.
  app.route("/", pageRoutes("host"));
  if (options.token) app.use(tokenAuth(options.token));
  app.use(
    bodyLimit({
      maxSize: 1024 * 1024,
      onError: (c) => c.json({ message: "Request body too large: the limit is 1 MiB" }, 413),
    }),
  );

  app.get("/svc/host/status", async (c) => {
    const running = await services.vms.runningCount();
    const max = 253; // one loopback address 127.0.1.2–254 each
    return c.json({
      status: "healthy",
      vm_count: running,
      max_vms: max,
      available_slots: Math.max(0, max - running),
      version: PACKAGE_VERSION,
      // What QEMU guests run on, and why TCG when it is (the probe boots firmware under KVM).
      ...(await acceleratorStatus()),
    });
  });
  app.get("/vnc/:name", vncRelay(services.vms, log));
  app.get("/wall/:name", wallQuery, wallRelay(services.vms, log));
  vmRoutes(app, services);
  egressRoutes(app, services);
  secretRoutes(app, services);
  snapshotRoutes(app, services);
  sleepRoutes(app, services);
  poolRoutes(app, services);
  imageRoutes(app, services);
  configRoutes(app, services);
  logRoutes(app, services);
  ipswRoutes(app, services);
  eventRoutes(app, services.events);
  if (options.metrics) metricsRoutes(app, options.metrics);

  app.notFound((c) => c.json({ message: `Not found: ${c.req.method} ${c.req.path}` }, 404));
  app.onError((err, c) => {
    if (err instanceof HTTPException) return err.getResponse();
    if (err instanceof HostError) return c.json({ message: err.message }, HTTP_STATUS[err.kind]);
    // A failed file-system operation is a failed operation (400), named as such.
    const code = (err as NodeJS.ErrnoException).code;
    if (typeof code === "string" && /^E[A-Z]+$/.test(code)) {
      const path = (err as NodeJS.ErrnoException).path;
      void services.log.error("Operation failed", {
        method: c.req.method,
        path: c.req.path,
        error: err.message,
      });
      return c.json({ message: `Operation failed: ${describeOsError(err, path).message}` }, 400);
    }
    log?.error({ err, path: c.req.path }, "request failed");
    void services.log.error("Request failed", { method: c.req.method, path: c.req.path, error: err.message });
    return c.json({ message: `Internal error: ${err.message}` }, 500);
  });
  return app;
}

/**
 * `Authorization: Bearer <token>` on every route, compared in constant time; the token is never logged.
 * A WebSocket upgrade (the page's VNC view and wall, which a browser cannot give headers) may pass `?token=`.
 */
function tokenAuth(token: string): MiddlewareHandler {
  const digest = (text: string) => createHash("sha256").update(text).digest();
  const expected = digest(token);
  const refusal = (message: string) => ({ message });
  const bearer = bearerAuth({
    verifyToken: (given) => timingSafeEqual(digest(given), expected),
    noAuthenticationHeader: {
      message: refusal(
        "Authentication required: send Authorization: Bearer <token> (the host service's token)",
      ),
    },
    invalidAuthenticationHeader: {
      message: refusal("Malformed Authorization header: expected Bearer <token>"),
    },
    invalidToken: { message: refusal("Invalid token") },
  });
  return async (c, next) => {
    const upgrade = c.req.header("upgrade")?.toLowerCase() === "websocket";
    const given = upgrade && !c.req.header("authorization") ? c.req.query("token") : undefined;
    if (given === undefined) return bearer(c, next);
    if (timingSafeEqual(digest(given), expected)) return next();
    return c.json(refusal("Invalid token"), 401);
  };
}
