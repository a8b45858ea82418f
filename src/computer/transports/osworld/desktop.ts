/**
 * The routes about the screen and its windows: `/screenshot`, `/screen_size`, `/cursor_position`,
 * `/platform`, `/window_size`, `/accessibility`, `/terminal`, the wallpaper, `/setup/open_file`,
 * `/setup/activate_window`, `/setup/close_window`, and the recording (`/start_recording`,
 * `/end_recording`, an MP4 from Hangar's recorder). Window routes use `wmctrl`, as upstream does.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { basename, extname } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Hono } from "hono";
import { findProgram } from "../../../os/launch.js";
import type { Bytes } from "../../core/bytes.js";
import type { ComputerEnv } from "../../http/env.js";
import { accessibilityXml, MAX_DEPTH, type TreeNode } from "./accessibility-xml.js";
import { expandUserPath } from "./files.js";
import { HangarCommandFailed, type OsworldCommands, runAction } from "./hangar-commands.js";
import {
  attachment,
  booleanField,
  formBody,
  htmlError,
  jsonBody,
  type OsworldContext,
  stringField,
  text,
} from "./replies.js";
import { quoteWord } from "./shell-words.js";

export interface DesktopDeps {
  commands: OsworldCommands;
  bodyLimitBytes: number;
  /** Variables for the programs the routes run (the desktop's: wmctrl needs DISPLAY). */
  env: () => Promise<Record<string, string>>;
  /** Seconds `/setup/open_file` waits for the window (upstream: 1800). */
  openFileTimeoutSeconds: number;
}

/** Elements read for `/accessibility` at most (a browser with a long page has a few thousand). */
const TREE_NODES = 20_000;

export function desktopRoutes(deps: DesktopDeps) {
  const { commands } = deps;
  const routes = new Hono<ComputerEnv>();
  let wallpaper: string | undefined;

  /** The command's result, or a JSON 500 `{status: "error", message}`. */
  const attempt = async <T>(
    work: () => Promise<T>,
  ): Promise<{ ok: true; value: T } | { ok: false; message: string }> => {
    try {
      return { ok: true, value: await work() };
    } catch (err) {
      if (err instanceof HangarCommandFailed) return { ok: false, message: err.message };
      throw err;
    }
  };
  const shell = async (line: string) => {
    const ran = await attempt(async () =>
      runAction<{ stdout: string; return_code: number }>(commands, "run", {
        command: line,
        timeout: 10,
        env: await deps.env(),
      }),
    );
    return ran.ok ? ran.value : { stdout: "", return_code: -1 };
  };

  routes.get("/screenshot", async (c) => {
    const shot = await attempt(() =>
      runAction<{ image_data: Bytes }>(commands, "capture", { format: "png" }),
    );
    if (!shot.ok) return c.json({ status: "error", message: shot.message }, 500);
    const image = shot.value.image_data;
    const png = new Uint8Array(image.data);
    image.release();
    return c.body(png, 200, { "content-type": "image/png" });
  });

  routes.post("/screen_size", async (c) => {
    const size = await attempt(() =>
      runAction<{ size: { width: number; height: number } }>(commands, "screenSize", {}),
    );
    if (!size.ok) return c.json({ status: "error", message: size.message }, 500);
    return c.json({ width: size.value.size.width, height: size.value.size.height });
  });

  routes.get("/cursor_position", async (c) => {
    const at = await attempt(() =>
      runAction<{ position: { x: number; y: number } }>(commands, "cursorPosition", {}),
    );
    if (!at.ok) return c.json({ status: "error", message: at.message }, 500);
    return c.json([at.value.position.x, at.value.position.y]);
  });

  routes.get("/platform", (c) =>
    text(c, process.platform === "darwin" ? "Darwin" : process.platform === "win32" ? "Windows" : "Linux"),
  );

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

  const tree = () =>
    runAction<{ tree: TreeNode }>(commands, "accessibilityTree", {
      max_depth: MAX_DEPTH,
      max_nodes: TREE_NODES,
      details: true,
    });

  routes.get("/accessibility", async (c) => {
    const read = await attempt(tree);
    if (!read.ok) return c.json({ status: "error", message: read.message }, 500);
    return c.json({ AT: accessibilityXml(read.value.tree) });
  });

  routes.get("/terminal", async (c) => {
    // Never fails: OSWorld's setup uses this route to see whether the server is up.
    const read = await attempt(tree).catch(() => undefined);
    const output = read?.ok ? terminalText(read.value.tree) : null;
    return c.json({ output, status: "success" });
  });

  routes.post("/wallpaper", async (c) => {
    // The image set through /setup/change_wallpaper, else GNOME's setting where there is one.
    let path = wallpaper;
    if (!path) {
      const { stdout, return_code } = await shell("gsettings get org.gnome.desktop.background picture-uri");
      if (return_code === 0)
        path = stdout
          .trim()
          .replace(/^'|'$/g, "")
          .replace(/^file:\/\//, "");
    }
    if (!path || !existsSync(path)) return htmlError(c, 404, "Wallpaper file not found");
    const data = await readFile(path).catch(() => undefined);
    if (!data) return htmlError(c, 500);
    return c.body(new Uint8Array(data), 200, { "content-type": "image/png" });
  });

  routes.post("/setup/change_wallpaper", async (c) => {
    const given = stringField(await jsonBody(c, deps.bodyLimitBytes), "path");
    if (!given) return text(c, "Path not supplied!", 400);
    const path = expandUserPath(given);
    if (!existsSync(path)) return text(c, `File not found: ${path}`, 404);
    const set = await attempt(() => runAction(commands, "setWallpaper", { path }));
    if (!set.ok) return text(c, `Failed to change wallpaper. Error: ${set.message}`, 500);
    wallpaper = path;
    return text(c, "Wallpaper changed successfully");
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

  routes.post("/start_recording", async (c) => {
    const status = await attempt(() => runAction<{ recording: unknown }>(commands, "recordingStatus", {}));
    if (status.ok && status.value.recording) {
      return c.json({ status: "error", message: "Recording is already in progress." }, 400);
    }
    const started = await attempt(() =>
      runAction(commands, "startRecording", { format: "mp4", fps: 30, cursor: true }),
    );
    if (!started.ok) {
      return c.json(
        { status: "error", message: `Failed to start recording. Error: ${started.message}` },
        500,
      );
    }
    return c.json({ status: "success", message: "Started recording successfully." });
  });

  routes.post("/end_recording", async (c) => {
    const status = await attempt(() => runAction<{ recording: unknown }>(commands, "recordingStatus", {}));
    if (status.ok && !status.value.recording) {
      return c.json({ status: "error", message: "No recording in progress to stop." }, 400);
    }
    const stopped = await attempt(() =>
      runAction<{ path: string; size_bytes: number }>(commands, "stopRecording", {}),
    );
    if (!stopped.ok) return c.json({ status: "error", message: stopped.message }, 500);
    const data = await readFile(stopped.value.path).catch(() => undefined);
    if (!data?.length) return htmlError(c, 500, "Recording failed. The output file is missing or empty.");
    return c.body(new Uint8Array(data), 200, {
      "content-type": "video/mp4",
      "content-disposition": attachment("recording.mp4"),
    });
  });

  return routes;
}

/** Upstream's XPath: gnome-terminal-server's active frame, its one focused terminal's text. */
function terminalText(desktop: TreeNode): string | null {
  const app = (desktop.children ?? []).find(
    (a) => a.role === "application" && a.name === "gnome-terminal-server",
  );
  const frame = app?.children?.find((f) => f.role === "frame" && f.states.includes("active"));
  if (!frame) return null;
  const found: TreeNode[] = [];
  const visit = (node: TreeNode) => {
    if (node.role === "terminal" && node.states.includes("focused")) found.push(node);
    for (const child of node.children ?? []) visit(child);
  };
  for (const child of frame.children ?? []) visit(child);
  return found.length === 1 ? (found[0].text ?? "").trimEnd() : null;
}
