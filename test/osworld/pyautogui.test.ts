/**
 * Hangar's pyautogui, as agents use it through OSWorld's `/execute`: every function's effect is read
 * back from the desktop (a GTK window's log of button presses and wheel notches, the bytes typed into
 * an xterm, the pointer from xdotool), with `python` and `python3` alike.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { APPS, eventually, focusWindow, PYTHON, startRecorderTerminal } from "../support/desktop.js";
import { executePython, type OsworldDesktop, startOsworldDesktop } from "./support.js";

let desk: OsworldDesktop;
const children: ChildProcess[] = [];
let clicksWindow: { x: number; y: number; width: number; height: number };
let clicksId: number;
let terminalId: number;

beforeAll(async () => {
  desk = await startOsworldDesktop();
  const child = spawn(PYTHON, [join(APPS, "clicks.py"), join(desk.dir, "clicks.log"), "osclicks"], {
    env: { ...desk.env, GDK_CORE_DEVICE_EVENTS: "1" },
    stdio: "ignore",
  });
  children.push(child);
  clicksId = await desk.waitForWindow("osclicks");
  await desk.run("xdotool", ["windowmove", String(clicksId), "20", "20"]);
  clicksWindow = await eventually(async () => {
    const g = await desk.geometry(clicksId);
    return g.x > 0 && g.x < 100 ? g : undefined;
  });
  terminalId = await startRecorderTerminal(desk);
  await desk.run("xdotool", ["windowmove", String(terminalId), "500", "300"]);
}, 60_000);

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await desk?.stop();
});

/** Runs agent code and expects it to succeed. */
async function agent(code: string, python = "python") {
  const { status, body } = await executePython(desk.base, code, python);
  expect(status).toBe(200);
  expect(body.error, body.error).toBe("");
  expect(body.returncode).toBe(0);
  return body.output as string;
}

/** The clicks window's log lines since `from`. */
function clickLog(from = 0): string[] {
  return desk.read("clicks.log").split("\n").filter(Boolean).slice(from);
}

/** Runs agent code, then waits for `count` new lines of the clicks window's log (those `keep` keeps). */
async function logOf(code: string, count: number, keep: (line: string) => boolean = () => true) {
  const start = clickLog().length;
  await agent(code);
  return eventually(() => {
    const lines = clickLog(start).filter(keep);
    return lines.length >= count ? lines : undefined;
  });
}

/** A point inside the clicks window (window coordinates → screen). */
function inClicks(x: number, y: number) {
  return { x: clicksWindow.x + x, y: clicksWindow.y + y };
}

describe("the pointer", () => {
  it("click, rightClick, middleClick, doubleClick and tripleClick press the right buttons at the right place", async () => {
    const p = inClicks(50, 60);
    const presses = await logOf(
      `pyautogui.click(${p.x}, ${p.y}); pyautogui.rightClick(${p.x + 10}, ${p.y}); ` +
        `pyautogui.middleClick(x=${p.x + 20}, y=${p.y}); pyautogui.doubleClick((${p.x + 30}, ${p.y})); ` +
        `pyautogui.tripleClick(${p.x + 40}, ${p.y}); pyautogui.click(${p.x}, ${p.y}, clicks=2, interval=0.05, button='right')`,
      10,
      (l) => l.startsWith("press"),
    );
    expect(presses).toEqual([
      "press 1 50 60",
      "press 3 60 60",
      "press 2 70 60",
      "press 1 80 60",
      "press 1 80 60",
      "press 1 90 60",
      "press 1 90 60",
      "press 1 90 60",
      "press 3 50 60",
      "press 3 50 60",
    ]);
  });

  it("mouseDown/mouseUp and dragTo/dragRel press at the start and release at the end", async () => {
    const a = inClicks(30, 40);
    const b = inClicks(200, 150);
    const lines = await logOf(
      `pyautogui.moveTo(${a.x}, ${a.y}); pyautogui.mouseDown(); pyautogui.moveTo(${b.x}, ${b.y}, duration=0.2); pyautogui.mouseUp(); ` +
        `pyautogui.moveTo(${a.x}, ${a.y}); pyautogui.dragTo(${b.x}, ${b.y}, duration=0.2, button='left'); ` +
        `pyautogui.dragRel(-100, -50, 0.1)`,
      6,
    );
    expect(lines).toEqual([
      "press 1 30 40",
      "release 1 200 150",
      "press 1 30 40",
      "release 1 200 150",
      "press 1 200 150",
      "release 1 100 100",
    ]);
  });

  it("scroll, vscroll and hscroll turn the wheel by notches, at x, y when given", async () => {
    const p = inClicks(100, 100);
    const lines = await logOf(
      `pyautogui.scroll(2, x=${p.x}, y=${p.y}); pyautogui.vscroll(-3); pyautogui.hscroll(1); pyautogui.hscroll(-2)`,
      8,
    );
    expect(lines).toEqual([
      "scroll up",
      "scroll up",
      "scroll down",
      "scroll down",
      "scroll down",
      "scroll right",
      "scroll left",
      "scroll left",
    ]);
  });

  it("moveTo, moveRel, position, size and onScreen agree with the X server", async () => {
    const out = await agent(
      "pyautogui.moveTo(300, 200); pyautogui.moveRel(15, -5); p = pyautogui.position(); s = pyautogui.size(); " +
        "print(p.x, p.y, s.width, s.height, pyautogui.onScreen(10, 10), pyautogui.onScreen(5000, 10))",
    );
    expect(out.trim()).toBe("315 195 1024 768 True False");
    expect(await desk.pointer()).toEqual({ x: 315, y: 195 });
  });

  it("FAILSAFE stops an action when the pointer is in a corner; PAUSE and sleep are there", async () => {
    const { body } = await executePython(
      desk.base,
      "pyautogui.FAILSAFE = True; pyautogui.moveTo(0, 0); pyautogui.click(400, 400)",
    );
    expect(body.returncode).toBe(1);
    expect(body.error).toMatch(/FailSafeException/);
    expect(await desk.pointer()).toEqual({ x: 0, y: 0 });
    const out = await agent(
      "pyautogui.PAUSE = 0; t = time.time(); pyautogui.sleep(0.2); print(round(time.time() - t, 1))",
    );
    expect(Number(out)).toBeGreaterThanOrEqual(0.2);
  });
});

describe("the keyboard", () => {
  beforeAll(async () => {
    const g = await desk.geometry(terminalId);
    await agent(`pyautogui.click(${g.x + 20}, ${g.y + 20})`);
    await focusWindow(desk, terminalId);
  });

  /** Bytes typed into the xterm since `from`. */
  const typed = (from: number) => desk.readBytes("raw.bin").subarray(from);

  it("write and typewrite type any Unicode exactly; press and hotkey send keys and combinations", async () => {
    const from = desk.readBytes("raw.bin").length;
    await agent(
      "pyautogui.write('Hi 日本 é€ 🚀'); pyautogui.typewrite('ab', interval=0.01); pyautogui.press('enter'); " +
        "pyautogui.hotkey('ctrl', 'c'); pyautogui.press(['tab', 'a'], presses=2); pyautogui.typewrite(['x', 'space', 'y'])",
      "python3",
    );
    const expected = Buffer.concat([
      Buffer.from("Hi 日本 é€ 🚀ab\r"),
      Buffer.from([3]),
      Buffer.from("\ta\tax y"),
    ]);
    await eventually(() => typed(from).length >= expected.length);
    expect(typed(from).toString("utf8")).toBe(expected.toString("utf8"));
  });

  it("keyDown and keyUp hold a key across other keys", async () => {
    const from = desk.readBytes("raw.bin").length;
    await agent(
      "pyautogui.keyDown('shift'); pyautogui.press('a'); pyautogui.keyUp('shift'); pyautogui.press('b')",
    );
    await eventually(() => typed(from).length >= 2);
    expect(typed(from).toString()).toBe("Ab");
  });
});

describe("the module", () => {
  it("an unknown function is a clear AttributeError, not a silent no-op", async () => {
    const { status, body } = await executePython(desk.base, "pyautogui.locateCenterOnScreen('button.png')");
    expect(status).toBe(200);
    expect(body.returncode).toBe(1);
    expect(body.error).toMatch(
      /AttributeError: module 'pyautogui' has no attribute 'locateCenterOnScreen': Hangar's pyautogui does not implement it/,
    );
  });

  it("prints nothing on import (getters parse the output), with python and python3 alike", async () => {
    for (const python of ["python", "python3"]) {
      const { body } = await executePython(desk.base, "import platform; print(platform.system())", python);
      expect(body).toMatchObject({ status: "success", output: "Linux\n", error: "", returncode: 0 });
    }
    // `python` is Hangar's shim first on the PATH the controller gives its children (Debian has none).
    const res = await fetch(`${desk.base}/execute`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ command: "command -v python", shell: true }),
    });
    expect(((await res.json()) as { output: string }).output.trim()).toMatch(/\/python\/bin\/python$/);
  });

  it("screenshot saves a PNG of the screen", async () => {
    const file = join(desk.dir, "shot.png");
    await agent(`pyautogui.screenshot(${JSON.stringify(file)})`);
    expect(existsSync(file)).toBe(true);
    const png = readFileSync(file);
    expect(png.subarray(1, 4).toString()).toBe("PNG");
    expect(png.readUInt32BE(16)).toBe(1024);
    expect(png.readUInt32BE(20)).toBe(768);
  });

  it("every action is in the server's activity timeline", async () => {
    await agent("pyautogui.moveTo(123, 77)");
    const res = await fetch(`${desk.server.url}/activity`);
    const { entries } = (await res.json()) as { entries: { command: string; params: unknown }[] };
    const moves = entries.filter((e) => e.command === "move_cursor");
    expect(moves.at(-1)?.params).toEqual({ x: 123, y: 77 });
    expect(entries.some((e) => e.command === "run_command")).toBe(true);
  });
});
