/**
 * OSWorld's desktop controller API (upstream's Flask `main.py`, normally port 5000) as a Hono app,
 * served on its own listener by the computer server (`hangar serve --osworld`). It has the same
 * origin policy and, in cloud mode, the same keys as every other route (upstream has no
 * authentication: a harness sends `X-Container-Name` and `X-API-Key`, docs/osworld.md).
 */
import { Hono, type MiddlewareHandler } from "hono";
import { CommandError } from "../../../common/errors.js";
import { type Logger, silentLogger } from "../../../common/logger.js";
import { type OriginPolicy, originGuard } from "../../../common/origin-policy.js";
import type { LiveStreams } from "../../../desktop/live/live-streams.js";
import type { CommandRegistry } from "../../core/registry.js";
import type { ComputerEnv } from "../../http/env.js";
import { httpStatusOf } from "../../http/failure-status.js";
import { executeRoutes } from "./execute.js";
import { fileRoutes } from "./files.js";
import type { OsworldCommandTable } from "./hangar-commands.js";
import { recordingRoutes } from "./recording.js";
import { htmlError } from "./replies.js";
import { screenRoutes } from "./screen.js";
import { scriptRoutes } from "./scripts.js";
import { streamingRoutes } from "./streaming.js";
import { windowRoutes } from "./windows.js";

export interface OsworldAppOptions {
  registry: CommandRegistry;
  /** Which command each action of the routes runs (commands/osworld.ts, from the composition root). */
  commands: OsworldCommandTable;
  originPolicy: OriginPolicy;
  /** Cloud mode's authentication, the middleware the other routes have. */
  auth?: MiddlewareHandler<ComputerEnv>;
  bodyLimitBytes: number;
  /** Variables for the programs the routes run (python-env.ts). */
  childEnv: () => Promise<Record<string, string>>;
  /** The desktop's H.264 streams (`/ws/h264`, `/live/h264.mp4`); without them those routes are 404. */
  streams?: LiveStreams;
  /** Seconds `/setup/open_file` waits for its window (default 1800, as upstream). */
  openFileTimeoutSeconds?: number;
  log?: Logger;
}

/** Every route of upstream's server, for the 405 of a known path asked with another method. */
const ROUTES: Record<string, string> = {
  "/execute": "POST",
  "/setup/execute": "POST",
  "/execute_with_verification": "POST",
  "/setup/execute_with_verification": "POST",
  "/setup/launch": "POST",
  "/screenshot": "GET",
  "/terminal": "GET",
  "/accessibility": "GET",
  "/screen_size": "POST",
  "/window_size": "POST",
  "/desktop_path": "POST",
  "/wallpaper": "POST",
  "/list_directory": "POST",
  "/file": "POST",
  "/setup/upload": "POST",
  "/platform": "GET",
  "/cursor_position": "GET",
  "/setup/change_wallpaper": "POST",
  "/setup/download_file": "POST",
  "/setup/open_file": "POST",
  "/setup/activate_window": "POST",
  "/setup/close_window": "POST",
  "/start_recording": "POST",
  "/end_recording": "POST",
  "/run_python": "POST",
  "/run_bash_script": "POST",
  "/ws/h264": "GET",
  "/ws/control": "GET",
  "/live/h264.mp4": "GET",
};
export const OSWORLD_ROUTES = Object.freeze({ ...ROUTES });

export function createOsworldApp(options: OsworldAppOptions) {
  const log = options.log ?? silentLogger;
  const limit = options.bodyLimitBytes;
  const app = new Hono<ComputerEnv>();
  app.use(
    originGuard(
      options.originPolicy,
      (detail) => ({ detail }),
      (reason, headers) => log.warn({ ...headers, reason }, "OSWorld route: request from a browser refused"),
    ),
  );
  if (options.auth) app.use("*", options.auth);
  const commands = { registry: options.registry, table: options.commands };
  const programs = { commands, bodyLimitBytes: limit, env: options.childEnv };
  app.route("/", executeRoutes(programs));
  app.route("/", scriptRoutes(programs));
  app.route("/", fileRoutes({ bodyLimitBytes: limit, files: options.registry.files }));
  const desktop = {
    commands,
    bodyLimitBytes: limit,
    env: options.childEnv,
    openFileTimeoutSeconds: options.openFileTimeoutSeconds ?? 1800,
    files: options.registry.files,
  };
  app.route("/", screenRoutes(desktop));
  app.route("/", windowRoutes(desktop));
  app.route("/", recordingRoutes(commands));
  if (options.streams) app.route("/", streamingRoutes({ ...programs, streams: options.streams }));
  app.notFound((c) => {
    const method = ROUTES[c.req.path];
    if (method && method !== c.req.method && !(method === "GET" && c.req.method === "HEAD")) {
      c.header("allow", `${method}, OPTIONS${method === "GET" ? ", HEAD" : ""}`);
      return htmlError(c, 405, "The method is not allowed for the requested URL.");
    }
    return htmlError(
      c,
      404,
      "The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again.",
    );
  });
  app.onError((err, c) => {
    // A refused request (invalid_params, too_large) is its HTTP status; anything else is a 500.
    const status = err instanceof CommandError ? httpStatusOf(err) : 500;
    if (status < 500) return htmlError(c, status, err.message);
    log.error({ err, path: c.req.path }, "OSWorld route failed");
    return htmlError(
      c,
      500,
      "The server encountered an internal error and was unable to complete your request.",
    );
  });
  return app;
}
