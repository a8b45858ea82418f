/**
 * `hangar serve --osworld [PORT]` as a user starts it: the controller is off unless asked, and on
 * the port given it drives the server's own virtual display with Hangar's pyautogui.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningCli, startCli } from "../support/cli-process.js";
import { eventually } from "../support/desktop.js";
import { executePython } from "./support.js";

let cli: RunningCli;
let base: string;
beforeAll(async () => {
  cli = await startCli([
    "serve",
    "--port",
    "0",
    "--osworld",
    "0",
    "--virtual-display",
    "640x480",
    "--warm-shells",
    "0",
  ]);
  base = await eventually(() => /OSWorld controller API on (http:\/\/\S+)/.exec(cli.stdout())?.[1], 30_000);
}, 60_000);
afterAll(() => cli?.stop());

describe("hangar serve --osworld", () => {
  it("serves the controller on its own port, next to the computer server", async () => {
    expect(new URL(base).port).not.toBe(new URL(cli.url).port);
    const res = await fetch(`${base}/screen_size`, { method: "POST" });
    expect(await res.json()).toEqual({ width: 640, height: 480 });
    const { body } = await executePython(base, "print(*pyautogui.size())");
    expect(body).toMatchObject({ status: "success", output: "640 480\n", returncode: 0 });
    // The computer server itself does not answer the controller's routes.
    expect((await fetch(`${cli.url}/screenshot`)).status).toBe(404);
  });
});

describe("HANGAR_PYAUTOGUI=system", () => {
  it("leaves the PyAutoGUI of the desktop's Python in place of Hangar's", async () => {
    const dir = mkdtempSync(join(tmpdir(), "hangar-system-pyautogui-"));
    writeFileSync(
      join(dir, "pyautogui.py"),
      "FAILSAFE = True\ndef size():\n    return ('system', 'pyautogui')\n",
    );
    const system = await startCli(
      ["serve", "--port", "0", "--osworld", "0", "--virtual-display", "640x480", "--warm-shells", "0"],
      { ...process.env, HANGAR_PYAUTOGUI: "system", PYTHONPATH: dir },
    );
    try {
      const url = await eventually(
        () => /OSWorld controller API on (http:\/\/\S+)/.exec(system.stdout())?.[1],
        30_000,
      );
      const { body } = await executePython(url, "print(*pyautogui.size())");
      expect(body).toMatchObject({ output: "system pyautogui\n", returncode: 0 });
    } finally {
      await system.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
