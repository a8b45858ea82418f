/**
 * Trajectories per session (`start_trajectory` … `stop_trajectory`), a person's take-control input
 * recorded as an agent's commands, the directory's bound with rotation, and a directory that cannot
 * be written.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import type { StepLine, TrajectoryLine } from "../../src/computer/core/trajectories/schema.js";
import { DesktopManager } from "../../src/desktop/manager.js";
import { startVirtualDisplay, type VirtualDisplay } from "../../src/desktop/virtual-display.js";
import { startTestServer } from "../support/server.js";

let display: VirtualDisplay;
let manager: DesktopManager;
const dir = mkdtempSync(join(tmpdir(), "hangar-trajectory-sessions-"));
const mounts: string[] = [];

beforeAll(async () => {
  display = await startVirtualDisplay({ width: 640, height: 480, windowManager: false });
  manager = new DesktopManager({ display: display.display });
});
afterAll(async () => {
  await manager?.close();
  await display?.stop();
  for (const mount of mounts) execFileSync("umount", [mount]);
  rmSync(dir, { recursive: true, force: true });
});

type Server = Awaited<ReturnType<typeof startTestServer>>;
const cmd = async (server: Server, command: string, params: Record<string, unknown> = {}) =>
  (await server.cmd(command, params)).event;

function lines(root: string, id: string): TrajectoryLine[] {
  return readFileSync(join(root, id, "steps.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line));
}
const stepsOf = (all: TrajectoryLine[]) => all.filter((l): l is StepLine => l.type === "step");

function directorySize(root: string): number {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .reduce((sum, e) => sum + statSync(join(e.parentPath, e.name)).size, 0);
}

describe("a trajectory per session", () => {
  it("records only between start_trajectory and stop_trajectory", async () => {
    const root = join(dir, "sessions");
    const server = await startTestServer({ desktop: manager.provider, trajectories: { dir: root } });
    try {
      expect(await cmd(server, "trajectory_status")).toMatchObject({ trajectory: null, always: false });
      await cmd(server, "version");
      const started = await cmd(server, "start_trajectory", { name: "open the settings" });
      expect(started).toMatchObject({ success: true, name: "open the settings", steps: 0 });
      await cmd(server, "left_click", { x: 10, y: 10 });
      await cmd(server, "wait", { ms: 1 });
      const stopped = await cmd(server, "stop_trajectory");
      expect(stopped).toMatchObject({ success: true, id: started.id });
      await cmd(server, "version");
      expect(await cmd(server, "stop_trajectory")).toMatchObject({ success: false, code: "not_found" });

      const all = lines(root, started.id);
      expect(all[0]).toMatchObject({ type: "start", name: "open the settings" });
      expect(stepsOf(all).map((s) => s.command)).toEqual(["start_trajectory", "left_click", "wait"]);
      expect(all.at(-1)).toMatchObject({ type: "end", reason: "stopped", steps: 3 });
      const list = (await (await fetch(`${server.url}/trajectories`)).json()) as { trajectories: unknown[] };
      expect(list.trajectories).toEqual([
        expect.objectContaining({ id: started.id, state: "finished", steps: 3, name: "open the settings" }),
      ]);
    } finally {
      await server.close();
    }
  });

  it("records a person's take control as the commands an agent would send", async () => {
    const root = join(dir, "person");
    const server = await startTestServer({ desktop: manager.provider, trajectories: { dir: root } });
    try {
      const { id } = await cmd(server, "start_trajectory", { name: "demonstration" });
      const live = new WebSocket(`${server.url.replace("http", "ws")}/live`);
      await new Promise((resolve) => live.once("open", resolve));
      live.send(JSON.stringify({ type: "control", on: true }));
      live.send(JSON.stringify({ type: "input", command: "left_click", params: { x: 50, y: 60 } }));
      live.send(JSON.stringify({ type: "input", command: "type_text", params: { text: "h" } }));
      live.send(JSON.stringify({ type: "input", command: "hotkey", params: { keys: ["ctrl", "s"] } }));
      await vi.waitFor(() => expect(stepsOf(lines(root, id)).length).toBe(5), { timeout: 10_000 });
      live.close();
      const steps = stepsOf(lines(root, id)).slice(1);
      expect(steps).toEqual([
        // Taking control is in the trajectory too, before the person's input (the control lease).
        expect.objectContaining({ actor: "person", client: "live", command: "control_taken" }),
        expect.objectContaining({
          actor: "person",
          client: "live",
          command: "left_click",
          point: { x: 50, y: 60 },
        }),
        expect.objectContaining({ actor: "person", command: "type_text", params: { text: "h" } }),
        expect.objectContaining({ actor: "person", command: "hotkey", params: { keys: ["ctrl", "s"] } }),
      ]);
    } finally {
      await server.close();
    }
  });
});

describe("the trajectory directory's bound", () => {
  it("rotates the open trajectory and deletes the oldest, staying within the bound", async () => {
    const root = join(dir, "bounded");
    const maxBytes = 24 * 1024;
    const server = await startTestServer({
      desktop: manager.provider,
      trajectories: { dir: root, always: true, maxBytes },
    });
    try {
      const first = (await cmd(server, "trajectory_status")).trajectory.id as string;
      // About 450 bytes a step (the command is cut at 200 characters): 80 steps are ~36 KB, rotated
      // every 6 KB.
      const command = `true # ${"x".repeat(300)}`;
      for (let i = 0; i < 80; i++) await cmd(server, "run_command", { command });
      // Rotating and deleting go on beside the commands: the directory is looked at until they are
      // done (a trajectory half deleted is one being deleted; one left so would fail here). A
      // rotation's new directory is there a moment before it is the open one (CI saw it once).
      await vi.waitFor(
        async () => {
          const current = (await cmd(server, "trajectory_status")).trajectory.id as string;
          const listed = readdirSync(root).sort();
          expect(listed.at(-1)).toBe(current);
          expect(listed.length).toBeGreaterThan(2);
          expect(listed).not.toContain(first);
          expect(directorySize(root)).toBeLessThanOrEqual(maxBytes + 6 * 1024);
          const oldest = lines(root, listed[0]);
          expect(oldest.at(-1)).toMatchObject({ type: "end", reason: "rotated", continued_in: listed[1] });
        },
        { timeout: 10_000, interval: 100 },
      );
    } finally {
      await server.close();
    }
  });

  it("says why when the directory cannot be written, and keeps serving", async () => {
    const readOnly = join(dir, "read-only");
    mkdirSync(readOnly);
    execFileSync("mount", ["-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", readOnly]);
    mounts.push(readOnly);
    const server = await startTestServer({
      desktop: manager.provider,
      trajectories: { dir: join(readOnly, "t") },
    });
    try {
      const reply = await cmd(server, "start_trajectory");
      expect(reply).toMatchObject({ success: false, code: "failed" });
      expect(reply.error).toMatch(/^Cannot record trajectories: Read-only file system/);
      expect(await cmd(server, "version")).toMatchObject({ success: true });
      expect((await cmd(server, "trajectory_status")).trajectory).toBeNull();
    } finally {
      await server.close();
    }
  });
});
