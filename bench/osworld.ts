/**
 * OSWorld's controller: `/screenshot` and `/execute` of a one-line pyautogui click, beside what the
 * same work costs through `POST /cmd`, and beside the floor of the reference server's way (a Python
 * process per action: `python3 -c pass` spawned from Node, before any PyAutoGUI import or X call).
 * `/accessibility` with the GTK test window open. Run: node --import tsx bench/osworld.ts
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { startComputerServer } from "../src/computer/server.js";
import { atspiProvider } from "../src/desktop/atspi/index.js";
import { DesktopManager } from "../src/desktop/manager.js";
import { startVirtualDisplay } from "../src/desktop/virtual-display.js";
import { startA11yApp } from "../test/support/a11y-app.js";
import { printTable, type Row, timeIt } from "./lib.js";

const execFileAsync = promisify(execFile);
const display = await startVirtualDisplay({ width: 1920, height: 1080, accessibility: true });
const desktop = new DesktopManager({ display: display.display });
const a11y = atspiProvider(display.env);
const app = await startA11yApp(display.env);
const server = await startComputerServer({
  port: 0,
  desktop: desktop.provider,
  accessibility: a11y,
  osworld: { port: 0 },
});
const base = server.osworldUrl ?? "";
const rows: Row[] = [];
const json = (body: unknown) => ({
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});
try {
  rows.push(
    await timeIt(
      "GET /screenshot (PNG, 1920x1080)",
      () => fetch(`${base}/screenshot`).then((r) => r.arrayBuffer()),
      {
        runs: 30,
      },
    ),
    await timeIt(
      "POST /cmd screenshot (base64 PNG, same screen)",
      () => fetch(`${server.url}/cmd`, json({ command: "screenshot", params: {} })).then((r) => r.text()),
      { runs: 30 },
    ),
    await timeIt(
      "POST /execute python -c 'import pyautogui; pyautogui.click(100, 200)' (OSWorld's prefix)",
      async () => {
        const res = await fetch(
          `${base}/execute`,
          json({
            command: [
              "python",
              "-c",
              "import pyautogui; import time; pyautogui.FAILSAFE = False; pyautogui.click(100, 200)",
            ],
            shell: false,
          }),
        );
        const body = (await res.json()) as { returncode: number; error: string };
        if (body.returncode !== 0) throw new Error(body.error);
      },
      { runs: 30, note: "includes pyautogui.PAUSE (0.1 s) after the click, as upstream" },
    ),
    await timeIt(
      "POST /cmd left_click (no Python)",
      () =>
        fetch(`${server.url}/cmd`, json({ command: "left_click", params: { x: 100, y: 200 } })).then((r) =>
          r.text(),
        ),
      { runs: 30 },
    ),
    await timeIt(
      "GET /accessibility (OSWorld's XML; the GTK test window)",
      () => fetch(`${base}/accessibility`).then((r) => r.text()),
      { runs: 20 },
    ),
    await timeIt(
      "python3 -c pass spawned from Node (the reference's per-action floor)",
      () => execFileAsync("python3", ["-c", "pass"]),
      { runs: 30 },
    ),
  );
  printTable("OSWorld controller (Xvfb 1920x1080)", rows);
} finally {
  await server.close();
  a11y.close();
  await app.stop();
  await desktop.close();
  await display.stop();
}
