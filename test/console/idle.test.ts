/**
 * `GET /activity/idle` on a real desktop (Xvfb + openbox): a screen left alone ages, an xterm
 * printing keeps it fresh, a live viewer (`WS /live`) counts while connected, and a command is
 * the last use. (The CPU part is measured on this busy machine's every process, so only its shape
 * is checked here; test/host/idle.test.ts sees it whole in a container.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { IdleReport } from "../../src/computer/core/idleness.js";
import { type DesktopServer, eventually, startDesktopServer } from "../support/desktop.js";

let desk: DesktopServer;

beforeAll(async () => {
  desk = await startDesktopServer({ width: 1024, height: 768 });
}, 60_000);
afterAll(async () => {
  await desk?.stop();
});

type Report = IdleReport;

const report = async (): Promise<Report> => {
  const res = await fetch(`${desk.server.url}/activity/idle`);
  expect(res.status).toBe(200);
  return (await res.json()) as Report;
};

describe("GET /activity/idle", () => {
  it("a screen left alone ages; nobody watches or holds control", async () => {
    const first = await report();
    expect(first).toMatchObject({ viewers: 0, control: false, busy_cores: 0.15 });
    expect(typeof first.cpu).toBe("number");
    expect(first.busy).toBe((first.cpu ?? 0) >= first.busy_cores);
    const aged = await eventually(async () => {
      const r = await report();
      return r.screen_s !== null && r.screen_s >= 2 ? r : null;
    }, 30_000);
    expect(aged.uptime_s).toBeGreaterThanOrEqual(aged.screen_s ?? 0);
  });

  it("an xterm printing keeps the screen changing; once it is gone the screen ages again", async () => {
    const xterm = desk.spawn("xterm", [
      "-geometry",
      "80x24+10+10",
      "-e",
      "sh",
      "-c",
      "while :; do date +%s.%N; sleep 0.1; done",
    ]);
    await eventually(async () => {
      const r = await report();
      return r.screen_s !== null && r.screen_s < 1;
    });
    // For three seconds, every look finds the screen changed within the last second.
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      const r = await report();
      expect(r.screen_s).not.toBeNull();
      expect(r.screen_s).toBeLessThan(1.5);
      expect(r.idle_s).toBeLessThan(1.5);
    }
    xterm.kill("SIGKILL");
    await eventually(async () => ((await report()).screen_s ?? 0) >= 2, 30_000);
  });

  it("a live viewer counts while connected, and makes the desktop not idle", async () => {
    const ws = new WebSocket(`${desk.server.url.replace("http", "ws")}/live`);
    await new Promise((resolve, reject) => {
      ws.once("open", resolve);
      ws.once("error", reject);
    });
    const watched = await eventually(async () => {
      const r = await report();
      return r.viewers === 1 ? r : null;
    });
    expect(watched.idle_s).toBe(0);
    ws.close();
    await eventually(async () => (await report()).viewers === 0);
  });

  it("a command is the last use", async () => {
    expect((await desk.cmd("get_screen_size")).success).toBe(true);
    const r = await report();
    expect(r.command_s).not.toBeNull();
    expect(r.command_s).toBeLessThan(2);
    expect(r.idle_s).toBeLessThanOrEqual(r.command_s ?? 0);
  });
});
