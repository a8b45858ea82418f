import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startVirtualDisplay } from "../../src/desktop/virtual-display.js";
import { descendants, waitUntilGone } from "../support/processes.js";

const commOf = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
};

describe("startVirtualDisplay", () => {
  it("starts Xvfb at the asked size with an EWMH window manager, and stops everything", async () => {
    const desktop = await startVirtualDisplay({ width: 1024, height: 700 });
    try {
      const env = { ...process.env, ...desktop.env };
      expect(execFileSync("xdpyinfo", { env }).toString()).toMatch(/dimensions:\s+1024x700 pixels/);
      expect(execFileSync("wmctrl", ["-m"], { env }).toString()).toMatch(/Openbox/);
    } finally {
      await desktop.stop();
    }
    expect(desktop.xvfb.exitCode !== null || desktop.xvfb.signalCode !== null).toBe(true);
  });

  it("gives the desktop a sound server of its own with a null sink, and stops it", async () => {
    const desktop = await startVirtualDisplay({ width: 320, height: 240, windowManager: false, audio: true });
    let pulse: number[] = [];
    try {
      expect(desktop.audioError).toBeUndefined();
      expect(desktop.env).toMatchObject({
        PULSE_SERVER: expect.stringMatching(/^unix:\//),
        HANGAR_AUDIO_SOURCE: "hangar.monitor",
      });
      const env = { ...process.env, ...desktop.env };
      // Programs on the desktop play into the null sink, whose monitor is what is recorded.
      const info = execFileSync("pactl", ["info"], { env }).toString();
      expect(info).toMatch(/Default Sink: hangar/);
      expect(info).toMatch(/Default Source: hangar\.monitor/);
      pulse = descendants(process.pid)
        .filter((p) => /(^|\/)(pulseaudio|parec) /.test(p.args))
        .map((p) => p.pid);
      expect(pulse.length).toBe(2);
      // The reader that keeps the idle sink rendering reads its own format: nothing is resampled
      // (at 44.1 kHz the server spent six times the CPU on it).
      const sink = execFileSync("pactl", ["list", "short", "sinks"], { env }).toString();
      const readers = execFileSync("pactl", ["list", "short", "source-outputs"], { env }).toString();
      expect(sink).toMatch(/\ts16le 2ch 48000Hz\t/);
      expect(readers.trim().split("\n")).toEqual([expect.stringMatching(/\ts16le 2ch 48000Hz$/)]);
    } finally {
      await desktop.stop();
    }
    for (const pid of pulse) expect(await waitUntilGone(pid)).toBe(true);
  });

  it("says at once that the window manager cannot start, and leaves no X server behind", async () => {
    // A PATH with the X server but no openbox.
    const bin = mkdtempSync(join(tmpdir(), "hangar-no-openbox-"));
    for (const program of ["Xvfb", "setpriv"]) {
      symlinkSync(
        execFileSync("sh", ["-c", `command -v ${program}`])
          .toString()
          .trim(),
        join(bin, program),
      );
    }
    const path = process.env.PATH;
    process.env.PATH = bin;
    const started = performance.now();
    try {
      await expect(startVirtualDisplay({ width: 320, height: 240 })).rejects.toThrow(
        /the window manager \(openbox\) could not be started: spawn openbox ENOENT/,
      );
    } finally {
      process.env.PATH = path;
      rmSync(bin, { recursive: true, force: true });
    }
    // Not the 10 s a window manager that never answers is given.
    expect(performance.now() - started).toBeLessThan(5000);
    const xservers = () => descendants(process.pid).filter((entry) => commOf(entry.pid) === "Xvfb");
    await expect.poll(xservers).toEqual([]);
  });

  it("starts two desktops side by side on different displays", async () => {
    const [a, b] = await Promise.all([startVirtualDisplay(), startVirtualDisplay({ windowManager: false })]);
    try {
      expect(a.display).not.toBe(b.display);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });
});
