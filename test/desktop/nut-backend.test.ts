/**
 * The nut-js backend driven directly on a real Xvfb + openbox, every effect read back from outside:
 * the pointer with xdotool, typed text from an xterm running `cat > file`, key bytes from a raw
 * recorder, buttons and wheel notches from a GTK window's event log, pixels from a known pattern,
 * the clipboard with xclip.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NutBackend } from "../../src/desktop/nut/index.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
import { APPS, eventually, PYTHON } from "../support/desktop.js";

const execFileAsync = promisify(execFile);
const SYMBOLS = "~`!@#$%^&*()_+-={}[]|\\:;\"'<>,.?/";
const UNICODE = "héllo wörld ñ ç ß É — «» ✓ 日本語 中文 한국어 😀🎉";
const PATTERN_AT = { x: 600, y: 420 };

describe("nut-js backend on X11", () => {
  let display: VirtualDisplay;
  let nut: NutBackend;
  let dir: string;
  const children: ChildProcess[] = [];
  const env = () => ({ ...process.env, ...display.env });
  const run = async (file: string, args: string[]) =>
    (await execFileAsync(file, args, { env: env() })).stdout;
  const read = (name: string) => {
    try {
      return readFileSync(join(dir, name), "utf8");
    } catch {
      return "";
    }
  };
  const start = (file: string, args: string[], extraEnv: Record<string, string> = {}) => {
    children.push(spawn(file, args, { env: { ...env(), ...extraEnv }, stdio: "ignore" }));
  };
  /** Sets the clipboard with xclip (its daemon keeps pipes open, so it gets none). */
  async function xclipSet(text: string) {
    const child = spawn("xclip", ["-selection", "clipboard", "-i"], {
      env: env(),
      stdio: ["pipe", "ignore", "ignore"],
    });
    child.stdin.end(text);
    await new Promise((resolve) => child.once("exit", resolve));
    // xclip's daemon may claim the selection a moment after its parent exits.
    await eventually(async () => (await run("xclip", ["-selection", "clipboard", "-o"])) === text);
  }
  async function windowId(title: string): Promise<string> {
    return eventually(
      async () => (await run("xdotool", ["search", "--name", `^${title}$`])).trim().split("\n")[0],
      15_000,
    );
  }
  async function focus(title: string) {
    const id = await windowId(title);
    await run("xdotool", ["windowactivate", id]).catch(() => undefined);
    await eventually(async () => (await run("xdotool", ["getactivewindow"])).trim() === id);
  }
  /** What `file` gained while `action` ran, once it has at least `expected`'s length in bytes. */
  async function gained(file: string, action: () => Promise<unknown>, expected: string): Promise<string> {
    const before = Buffer.byteLength(read(file));
    await action();
    const fresh = () => Buffer.from(read(file)).subarray(before).toString("utf8");
    return eventually(() =>
      Buffer.byteLength(fresh()) >= Buffer.byteLength(expected) ? fresh() : null,
    ).catch(fresh);
  }

  beforeAll(async () => {
    display = await startVirtualDisplay({ width: 1024, height: 768 });
    dir = mkdtempSync(join(tmpdir(), "hangar-nut-test-"));
    nut = new NutBackend({ env: display.env });
    await nut.ready();
    start("xterm", [
      "-u8",
      "-geometry",
      "80x10+0+0",
      "-title",
      "nutcat",
      "-e",
      "sh",
      "-c",
      `stty -icanon; exec cat > '${join(dir, "cat.txt")}'`,
    ]);
    start("xterm", [
      "-geometry",
      "80x10+0+200",
      "-title",
      "nutraw",
      "-e",
      PYTHON,
      join(APPS, "recorder.py"),
      join(dir, "raw.bin"),
    ]);
    start(PYTHON, [join(APPS, "clicks.py"), join(dir, "clicks.log"), "nutclicks"], {
      GDK_CORE_DEVICE_EVENTS: "1",
    });
    start(PYTHON, [join(APPS, "pattern.py"), String(PATTERN_AT.x), String(PATTERN_AT.y)]);
    await Promise.all(["nutcat", "nutraw", "nutclicks"].map(windowId));
  });

  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
    await nut?.close();
    await display?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("moves the pointer without animation and reads it back", async () => {
    await nut.moveCursor({ x: 321, y: 234 });
    expect(await run("xdotool", ["getmouselocation"])).toContain("x:321 y:234");
    expect(await nut.cursorPosition()).toEqual({ x: 321, y: 234 });
    expect(await nut.screenSize()).toEqual({ width: 1024, height: 768 });
  });

  it("types ASCII symbols, accents, CJK and emoji exactly, and leaves the clipboard as it was", async () => {
    await xclipSet("saved clipboard");
    await focus("nutcat");
    const ascii = `Hello ${SYMBOLS} 0123456789\n`;
    const mixed = `${ascii}${UNICODE}\n`;
    expect(await gained("cat.txt", () => nut.typeText(ascii), ascii)).toBe(ascii);
    expect(await gained("cat.txt", () => nut.typeText(mixed), mixed)).toBe(mixed);
    expect(await run("xclip", ["-selection", "clipboard", "-o"])).toBe("saved clipboard");
  });

  it("presses key combinations and shifted characters as keys", async () => {
    await focus("nutraw");
    const press = async (...keys: string[]) => {
      for (const key of keys) await nut.key(key, "down");
      for (const key of [...keys].reverse()) await nut.key(key, "up");
    };
    const got = await gained(
      "raw.bin",
      async () => {
        await press("ctrl", "a");
        await press("up");
        await press("f5");
        await press("shift", "tab");
        await press("%");
        await press("A");
        await press("é"); // no key types it: pressing it pastes it
        await press("enter");
      },
      "\x01\x1b[A\x1b[15~\x1b[Z%Aé\r",
    );
    expect(got).toBe("\x01\x1b[A\x1b[15~\x1b[Z%Aé\r");
  });

  it("clicks each button where the pointer is and scrolls in the direction asked", async () => {
    const id = await windowId("nutclicks");
    const geometry = await run("xwininfo", ["-id", id]);
    const field = (name: string) => Number(new RegExp(`${name}:\\s+(-?\\d+)`).exec(geometry)?.[1]);
    const origin = { x: field("Absolute upper-left X"), y: field("Absolute upper-left Y") };
    const log = await gained(
      "clicks.log",
      async () => {
        await nut.moveCursor({ x: origin.x + 50, y: origin.y + 60 });
        for (const button of ["left", "right", "middle"] as const) {
          await nut.mouseButton(button, "down");
          await nut.mouseButton(button, "up");
        }
        await nut.scroll(0, 2);
        await nut.scroll(0, -1);
        await nut.scroll(1, 0);
        await nut.scroll(-1, 0);
      },
      "press 1 50 60\n".repeat(6) + "scroll down\n".repeat(5),
    );
    expect(log.trim().split("\n")).toEqual([
      "press 1 50 60",
      "release 1 50 60",
      "press 3 50 60",
      "release 3 50 60",
      "press 2 50 60",
      "release 2 50 60",
      "scroll up",
      "scroll up",
      "scroll down",
      "scroll right",
      "scroll left",
    ]);
  });

  it("captures the screen in RGBA order with opaque alpha, whole or a region", async () => {
    const pixel = (image: { width: number; data: Buffer }, x: number, y: number) => [
      ...image.data.subarray((y * image.width + x) * 4, (y * image.width + x) * 4 + 4),
    ];
    const { x, y } = PATTERN_AT;
    const screen = await eventually(async () => {
      const image = await nut.capture();
      return pixel(image, x, y).join() === "255,0,0,255" ? image : null;
    }, 15_000);
    expect([screen.width, screen.height, screen.channels]).toEqual([1024, 768, 4]);
    expect(pixel(screen, x + 150, y + 10)).toEqual([0, 255, 0, 255]);
    expect(pixel(screen, x + 250, y + 170)).toEqual([0, 0, 255, 255]);
    expect(pixel(screen, x + 10, y + 190)).toEqual([255, 255, 255, 255]);

    // An unchanged screen comes back as the same image; a changed one as a new image.
    await eventually(async () => {
      const first = await nut.capture();
      const second = await nut.capture();
      return first === second;
    });
    const before = await nut.capture();
    await focus("nutcat");
    await nut.typeText("changes the screen");
    const after = await eventually(async () => {
      const image = await nut.capture();
      return image !== before && !image.data.equals(before.data) ? image : null;
    });
    expect(pixel(after, x, y)).toEqual([255, 0, 0, 255]);

    const region = await nut.capture({ x: x + 90, y: y + 100, width: 30, height: 20 });
    expect([region.width, region.height, region.data.length]).toEqual([30, 20, 30 * 20 * 4]);
    expect(pixel(region, 0, 0)).toEqual([255, 0, 0, 255]);
    expect(pixel(region, 29, 19)).toEqual([0, 255, 0, 255]);
  });

  it("reads and writes the clipboard in Unicode, checked with xclip", async () => {
    await nut.writeClipboard(`copied ${UNICODE}\n\ttab`);
    expect(await run("xclip", ["-selection", "clipboard", "-o"])).toBe(`copied ${UNICODE}\n\ttab`);
    await xclipSet("from xclip ✓");
    expect(await nut.readClipboard()).toBe("from xclip ✓");
  });

  it("lists windows with their titles (EWMH, not nut-js's untitled frames) and activates one", async () => {
    const windows = await nut.listWindows();
    expect(windows.map((w) => w.title)).toEqual(expect.arrayContaining(["nutcat", "nutraw", "nutclicks"]));
    const cat = windows.find((w) => w.title === "nutcat")!;
    await nut.windowAction(cat.id, "activate");
    expect((await nut.activeWindow())?.title).toBe("nutcat");
    expect(await nut.environment()).toBe("openbox");
  });
});
