import { createServer, type Server } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ephemeralRange, PublishedPorts, parsePortRange } from "./published-ports.js";

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
});

function listenOn(port: number): Promise<void> {
  const server = createServer();
  servers.push(server);
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port, exclusive: true }, () => resolve());
  });
}

describe("published ports of container desktops", () => {
  it("are picked in turn from the range, outside the kernel's ephemeral ports", async () => {
    const ephemeral = await ephemeralRange();
    const ports = new PublishedPorts({ first: 20000, last: 29999 }, async () => new Set());
    const picked = [...(await ports.pick(3)), ...(await ports.pick(3))];
    expect(new Set(picked).size).toBe(6);
    for (const port of picked) {
      expect(port).toBeGreaterThanOrEqual(20000);
      expect(port).toBeLessThanOrEqual(29999);
      expect(port < ephemeral.first || port > ephemeral.last).toBe(true);
    }
  });

  it("skip a port some program listens on and one a container publishes", async () => {
    // A range of 16: every port is tried within one pick of 14.
    const first = 24000 + Math.floor(Math.random() * 4000);
    const range = { first, last: first + 15 };
    await listenOn(first + 3);
    const ports = new PublishedPorts(range, async () => new Set([first + 5, first + 9]));
    const picked = await ports.pick(13);
    expect(picked).not.toContain(first + 3);
    expect(picked).not.toContain(first + 5);
    expect(picked).not.toContain(first + 9);
    await expect(ports.pick(14)).rejects.toThrow(`No 14 free loopback ports left in ${first}–${first + 15}`);
  });

  it("refuse a range that lies within the ephemeral ports", async () => {
    const ephemeral = await ephemeralRange();
    const ports = new PublishedPorts(
      { first: ephemeral.first, last: ephemeral.first + 100 },
      async () => new Set(),
    );
    await expect(ports.pick(1)).rejects.toThrow(/lie within the kernel's ephemeral ports/);
  });

  it("parse FIRST-LAST and name what is wrong", () => {
    expect(parsePortRange("20000-29999")).toEqual({ first: 20000, last: 29999 });
    expect(parsePortRange("20000")).toMatch(/expected FIRST-LAST/);
    expect(parsePortRange("80-2000")).toMatch(/from 1025 to 65535/);
    expect(parsePortRange("20000-70000")).toMatch(/from 1025 to 65535/);
    expect(parsePortRange("20010-20000")).toMatch(/at least 16 ports/);
  });
});
