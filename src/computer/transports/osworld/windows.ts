/**
 * The routes about windows, with `wmctrl` as upstream: `/window_size`, `/setup/open_file` (waits
 * for the window), `/setup/activate_window`, `/setup/close_window`.
 */
import { existsSync } from "node:fs";
import { basename, extname } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Hono } from "hono";
import { findProgram } from "../../../os/launch.js";
import type { ComputerEnv } from "../../http/env.js";
import { expandUserPath } from "./files.js";
import { attempt, runAction, shellLine } from "./hangar-commands.js";
import {
  booleanField,
  formBody,
  htmlError,
  jsonBody,
  type OsworldContext,
  stringField,
  text,
} from "./replies.js";
import type { DesktopDeps } from "./screen.js";
import { quoteWord } from "./shell-words.js";

export function windowRoutes(deps: DesktopDeps) {
  const { commands } = deps;
  const routes = new Hono<ComputerEnv>();
  const shell = (line: string) => shellLine(commands, deps.env, line);

  routes.post("/window_size", async (c) => {
    const form = await formBody(c, deps.bodyLimitBytes);
    const wanted = form.get("app_class_name");
    if (!wanted) return c.json({ error: "app_class_name is required" }, 400);
    // wmctrl -lxG: id, desktop, x, y, width, height, instance.Class, host, title.
    const { stdout } = await shell("wmctrl -lxG");
    for (const line of stdout.split("\n")) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 7) continue;
      const classes = fields[6].split(".").map((p) => p.toLowerCase());
      if (classes.includes(wanted.toLowerCase())) {
        return c.json({ width: Number(fields[4]), height: Number(fields[5]) });
      }
    }
    return htmlError(c, 500, `No window of class ${wanted}`);
  });

  routes.post("/setup/open_file", async (c) => {
    const given = stringField(await jsonBody(c, deps.bodyLimitBytes), "path");
    if (!given) return text(c, "Path not supplied!", 400);
    const path = expandUserPath(given);
    let keys: string[];
    let started: { ok: boolean; message?: string };
    if (existsSync(path)) {
      const name = basename(path);
      keys = [name, name.slice(0, name.length - extname(name).length)].filter(Boolean);
      started = await attempt(() => runAction(commands, "openTarget", { target: path }));
    } else if (findProgram(given)) {
      keys = [given];
      started = await attempt(() => runAction(commands, "startProgram", { app: given, args: [] }));
    } else {
      return text(c, `Application/file not found: ${path}`, 404);
    }
    if (!started.ok) return text(c, `Failed to open ${path}. Error: ${started.message}`, 500);
    const deadline = performance.now() + deps.openFileTimeoutSeconds * 1000;
    const gone = c.req.raw.signal;
    while (performance.now() < deadline && !gone.aborted) {
      const { stdout } = await shell("wmctrl -l");
      const line = stdout.split("\n").find((l) => keys.some((k) => l.includes(k)));
      if (line) {
        await shell(`wmctrl -i -a ${quoteWord(line.split(/\s+/)[0])}`);
        return text(c, "File opened and window activated successfully");
      }
      await sleep(1000);
    }
    return text(c, `Failed to find window for ${given} within ${deps.openFileTimeoutSeconds} seconds.`, 500);
  });

  const windowAction = (letter: "a" | "c", reply: string) => async (c: OsworldContext) => {
    const data = await jsonBody(c, deps.bodyLimitBytes);
    const name = stringField(data, "window_name");
    if (!name) return text(c, "window_name required", 400);
    const flags = `-${booleanField(data, "by_class", false) ? "x" : ""}${booleanField(data, "strict", false) ? "F" : ""}${letter}`;
    // As upstream: wmctrl's answer is not looked at.
    await shell(`wmctrl ${flags} ${quoteWord(name)}`);
    return text(c, reply);
  };
  routes.post("/setup/activate_window", windowAction("a", "Window activated successfully"));
  routes.post("/setup/close_window", windowAction("c", "Window closed successfully."));

  return routes;
}
