/**
 * Coordinate mapping is stateless: a screenshot's id (or the image's size) names the mapping, and
 * without either each client connection falls back to its own last screenshot, never another
 * client's.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TestSocket, wsUrl } from "../support/clients.js";
import { type DesktopServer, startDesktopServer } from "../support/desktop.js";

let desk: DesktopServer;
beforeAll(async () => {
  desk = await startDesktopServer({ width: 800, height: 600 });
});
afterAll(() => desk?.stop());

describe("to_screen_coordinates", () => {
  it("maps each client's points with its own last screenshot", async () => {
    const half = await TestSocket.open(wsUrl(desk.server.url));
    const quarter = await TestSocket.open(wsUrl(desk.server.url));
    try {
      expect((await half.request("screenshot", { scale: 0.5 })).scale).toBe(0.5);
      expect((await quarter.request("screenshot", { scale: 0.25 })).scale).toBe(0.25);
      // The second client's screenshot does not change the first one's mapping.
      expect((await half.request("to_screen_coordinates", { x: 100, y: 50 })).coordinates).toEqual([
        200, 100,
      ]);
      expect((await quarter.request("to_screen_coordinates", { x: 100, y: 50 })).coordinates).toEqual([
        400, 200,
      ]);
      expect((await quarter.request("to_screenshot_coordinates", { x: 400, y: 200 })).coordinates).toEqual([
        100, 50,
      ]);
    } finally {
      await half.close();
      await quarter.close();
    }
  });

  it("maps a region screenshot through its id, from any client", async () => {
    const shot = await desk.cmd("screenshot", {
      region: { x: 100, y: 200, width: 400, height: 200 },
      scale: 0.5,
    });
    expect(shot.screenshot_id).toMatch(/^[0-9a-f]{12}$/);
    const socket = await TestSocket.open(wsUrl(desk.server.url));
    try {
      const mapped = await socket.request("to_screen_coordinates", {
        x: 10,
        y: 20,
        screenshot_id: shot.screenshot_id,
      });
      expect(mapped.coordinates).toEqual([120, 240]);
    } finally {
      await socket.close();
    }
  });

  it("says what is wrong with an unknown id or two ways at once", async () => {
    const unknown = await desk.cmd("to_screen_coordinates", { x: 1, y: 1, screenshot_id: "0123456789ab" });
    expect(unknown).toMatchObject({ success: false, code: "not_found" });
    expect(unknown.error).toMatch(/^Unknown screenshot_id: 0123456789ab/);
    const both = await desk.cmd("to_screen_coordinates", { x: 1, y: 1, screenshot_id: "x", scale: 0.5 });
    expect(both).toMatchObject({ success: false, code: "invalid_params" });
    const half = await desk.cmd("to_screen_coordinates", { x: 1, y: 1, screenshot_width: 400 });
    expect(half.error).toMatch(/screenshot_width and screenshot_height go together/);
  });
});
