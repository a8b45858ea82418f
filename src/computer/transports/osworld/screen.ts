/**
 * The routes about the screen: `/screenshot`, `/screen_size`, `/cursor_position`, `/platform`,
 * `/accessibility`, `/terminal` and the wallpaper.
 */
import { Hono } from "hono";
import type { FileSystem } from "../../../common/file-system.js";
import { readImageFile } from "../../../desktop/wallpaper.js";
import type { Bytes } from "../../core/bytes.js";
import type { ComputerEnv } from "../../http/env.js";
import { accessibilityXml, MAX_DEPTH, type TreeNode } from "./accessibility-xml.js";
import { expandUserPath } from "./files.js";
import { attempt, type OsworldCommands, runAction, shellLine } from "./hangar-commands.js";
import { htmlError, jsonBody, stringField, text } from "./replies.js";

export interface DesktopDeps {
  commands: OsworldCommands;
  bodyLimitBytes: number;
  /** Variables for the programs the routes run (the desktop's: wmctrl needs DISPLAY). */
  env: () => Promise<Record<string, string>>;
  /** Seconds `/setup/open_file` waits for the window (upstream: 1800). */
  openFileTimeoutSeconds: number;
  /** The desktop user's file system (`--command-user`: its file worker's): the wallpaper is read through it. */
  files: FileSystem;
}

/** Elements read for `/accessibility` at most (a browser with a long page has a few thousand). */
const TREE_NODES = 20_000;

export function screenRoutes(deps: DesktopDeps) {
  const { commands } = deps;
  const routes = new Hono<ComputerEnv>();
  let wallpaper: string | undefined;
  const shell = (line: string) => shellLine(commands, deps.env, line);

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
    if (
      !path ||
      !(await deps.files.stat(path).then(
        () => true,
        () => false,
      ))
    )
      return htmlError(c, 404, "Wallpaper file not found");
    const data = await readImageFile(path, deps.files).catch(() => undefined);
    if (!data) return htmlError(c, 500);
    return c.body(new Uint8Array(data), 200, { "content-type": "image/png" });
  });

  routes.post("/setup/change_wallpaper", async (c) => {
    const given = stringField(await jsonBody(c, deps.bodyLimitBytes), "path");
    if (!given) return text(c, "Path not supplied!", 400);
    const path = expandUserPath(given);
    if (
      !(await deps.files.stat(path).then(
        () => true,
        () => false,
      ))
    )
      return text(c, `File not found: ${path}`, 404);
    const set = await attempt(() => runAction(commands, "setWallpaper", { path }));
    if (!set.ok) return text(c, `Failed to change wallpaper. Error: ${set.message}`, 500);
    wallpaper = path;
    return text(c, "Wallpaper changed successfully");
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
