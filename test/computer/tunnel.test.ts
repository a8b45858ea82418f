/**
 * `GET /tunnel/{port}`: a WebSocket that carries one TCP connection to a port of the desktop's
 * loopback, byte for byte, both ways — what the host service reaches a sandbox's ports through.
 * Real servers on real ports: a greeting sent before the upgrade completes is not lost, a port
 * where nothing listens is a plain 502, and cloud mode's keys and the origin policy apply.
 */
import { once } from "node:events";
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { startComputerServer } from "../../src/computer/server.js";
import { tryUpgrade } from "../support/raw-http.js";
import { startTestServer } from "../support/server.js";

let server: Awaited<ReturnType<typeof startTestServer>>;
let service: Server;
let servicePort: number;
const connections: Socket[] = [];

beforeAll(async () => {
  server = await startTestServer();
  // A service that greets first (as VNC does), then echoes.
  service = createServer((socket) => {
    connections.push(socket);
    socket.write("hello from the service\n");
    socket.pipe(socket);
  }).listen(0, "127.0.0.1");
  await once(service, "listening");
  servicePort = (service.address() as { port: number }).port;
});
afterAll(async () => {
  for (const socket of connections) socket.destroy();
  service?.close();
  await server?.close();
});

const wsUrl = (base: string, port: number | string) => `${base.replace(/^http/, "ws")}/tunnel/${port}`;

describe("GET /tunnel/{port}", () => {
  it("carries the port's bytes both ways, the greeting sent before the upgrade included", async () => {
    const ws = new WebSocket(wsUrl(server.url, servicePort));
    const received: Buffer[] = [];
    ws.on("message", (data: Buffer) => received.push(data));
    await once(ws, "open");
    const text = () => Buffer.concat(received).toString();
    await expect.poll(text).toBe("hello from the service\n");
    const payload = Buffer.alloc(256 * 1024, 7);
    ws.send(payload, { binary: true });
    await expect.poll(() => Buffer.concat(received).length).toBe(23 + payload.length);
    expect(Buffer.concat(received).subarray(23).equals(payload)).toBe(true);
    // The service closing its end closes the WebSocket.
    connections.at(-1)?.end();
    const [code] = await once(ws, "close");
    expect(code).toBe(1001);
  });

  it("closes the connection to the port when the WebSocket goes", async () => {
    const ws = new WebSocket(wsUrl(server.url, servicePort));
    await once(ws, "open");
    await expect.poll(() => connections.length).toBeGreaterThan(0);
    const socket = connections.at(-1) as Socket;
    ws.terminate();
    await once(socket, "close");
  });

  it("answers a port where nothing listens with 502, a bad port or a plain GET with 400", async () => {
    const closed = createServer().listen(0, "127.0.0.1");
    await once(closed, "listening");
    const free = (closed.address() as { port: number }).port;
    closed.close();
    await once(closed, "close");
    // (An upgrade's refusal carries its status only: the Node adapter sends no body with it.)
    expect(await tryUpgrade(wsUrl(server.url, free), {})).toBe(502);
    expect(await tryUpgrade(wsUrl(server.url, 70000), {})).toBe(400);
    expect(await tryUpgrade(wsUrl(server.url, "x1"), {})).toBe(400);
    const plain = await fetch(`${server.url}/tunnel/${servicePort}`);
    expect(plain.status).toBe(400);
    expect((await plain.json()).detail).toMatch(/is a WebSocket/);
  });

  it("is refused to pages of other origins, and without the key in cloud mode", async () => {
    expect(await tryUpgrade(wsUrl(server.url, servicePort), { origin: "http://evil.example" })).toBe(403);
    const cloud = await startComputerServer({
      port: 0,
      cloud: { containerName: "tunnel-box", keys: ["sk-tunnel-test-0123456789"], limiter: false },
    });
    try {
      expect(await tryUpgrade(wsUrl(cloud.url, servicePort), {})).toBe(401);
      const opened = await tryUpgrade(wsUrl(cloud.url, servicePort), {
        "x-container-name": "tunnel-box",
        "x-api-key": "sk-tunnel-test-0123456789",
      });
      expect(opened).toBe("open");
    } finally {
      await cloud.close();
    }
  });
});
