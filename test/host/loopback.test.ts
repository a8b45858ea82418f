/** Choosing a VM's loopback address and host ports. */
import { createServer, type Server } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { loopbackNetworkProblem, pickForwarding } from "../../src/host/qemu/loopback.js";
import { startTestHost } from "./support.js";

// A network of its own: test files running at once use other ones (support.ts), `hangar host serve`
// the default 127.0.1.
const NET = "127.0.2";

const held: Server[] = [];
afterAll(async () => {
  await Promise.all(held.map((s) => new Promise((r) => s.close(r))));
});

function hold(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen({ host, port, exclusive: true }, () => {
      held.push(server);
      resolve((server.address() as { port: number }).port);
    });
  });
}

describe("pickForwarding", () => {
  it("skips addresses other VMs hold", async () => {
    const port = await hold(`${NET}.250`, 0); // any free port number, held elsewhere
    const picked = await pickForwarding(new Set([`${NET}.2`, `${NET}.3`]), { "8000": [port] }, NET);
    expect(picked.ipAddress).toBe(`${NET}.4`);
    expect(picked.ports).toEqual({ "8000": port });
  });

  it("falls back to the next port when the preferred one is held on every address", async () => {
    const busy = await hold(`${NET}.2`, 0);
    for (const n of [3, 4, 5, 6, 7]) await hold(`${NET}.${n}`, busy);
    const spare = await hold(`${NET}.251`, 0);
    held.pop()?.close();
    const picked = await pickForwarding(new Set(), { "22": [busy, spare] }, NET);
    expect(picked).toEqual({ ipAddress: `${NET}.2`, ports: { "22": spare } });
  });

  it("chooses in 127.0.1 unless told another network; a network that is not 127.A.B is refused", async () => {
    const port = await hold("127.0.3.9", 0);
    held.pop()?.close();
    expect((await pickForwarding(new Set(), { "8000": [port] })).ipAddress).toMatch(/^127\.0\.1\.\d+$/);
    expect(loopbackNetworkProblem("127.20.255")).toBeUndefined();
    for (const bad of ["10.0.1", "127.0.1.5", "127.300.1", "127.0"]) {
      expect(loopbackNetworkProblem(bad), bad).toBe("expected 127.A.B (VMs then get 127.A.B.2–254)");
    }
    // A service given one refuses to start, saying what was wrong.
    await expect(startTestHost({ loopbackNetwork: "10.0.1" })).rejects.toThrow(
      "Invalid loopback network '10.0.1': expected 127.A.B (VMs then get 127.A.B.2–254)",
    );
  });
});
