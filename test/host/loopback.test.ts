/** Choosing a VM's loopback address and host ports. */
import { createServer, type Server } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { pickForwarding } from "../../src/host/qemu/loopback.js";

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
    const port = await hold("127.0.1.250", 0); // any free port number, held elsewhere
    const picked = await pickForwarding(new Set(["127.0.1.2", "127.0.1.3"]), { "8000": [port] });
    expect(picked.ipAddress).toBe("127.0.1.4");
    expect(picked.ports).toEqual({ "8000": port });
  });

  it("falls back to the next port when the preferred one is held on every address", async () => {
    const busy = await hold("127.0.1.2", 0);
    for (const n of [3, 4, 5, 6, 7]) await hold(`127.0.1.${n}`, busy);
    const spare = await hold("127.0.1.251", 0);
    held.pop()?.close();
    const picked = await pickForwarding(new Set(), { "22": [busy, spare] });
    expect(picked).toEqual({ ipAddress: "127.0.1.2", ports: { "22": spare } });
  });
});
