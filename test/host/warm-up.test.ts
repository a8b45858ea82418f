/**
 * A pool member's warm-up: its computer server must answer a screenshot in each first-use way
 * (JPEG, PNG, scaled) before the member counts as ready; one that fails is asked again until it
 * answers or the time runs out. The computer server here is a real HTTP server on loopback that
 * answers as the test says.
 */
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, it } from "vitest";
import type { RuntimeRecord } from "../../src/host/desktops/runtime.js";
import { WARM_UP_SCREENSHOTS, warmUp } from "../../src/host/desktops/warm-up.js";

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

/** A computer server stand-in: `answer` decides each /cmd reply from the command asked. */
async function cmdServer(answer: (body: { command: string; params: object }) => [number, object]) {
  const asked: { command: string; params: object; key?: string }[] = [];
  const server = createServer((req, res) => {
    let text = "";
    req.on("data", (chunk) => {
      text += chunk;
    });
    req.on("end", () => {
      const body = JSON.parse(text || "{}");
      asked.push({ ...body, key: req.headers["x-api-key"] as string | undefined });
      const [status, reply] = req.url === "/cmd" ? answer(body) : [404, { message: "not found" }];
      res.writeHead(status, { "content-type": "text/event-stream" });
      res.end(`data: ${JSON.stringify(reply)}\n\n`);
    });
  });
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, asked };
}

const record = (url: string | null): RuntimeRecord =>
  ({
    name: "desk",
    runtime: "container",
    status: "running",
    computerServerUrl: url,
    apiKey: "k1",
  }) as RuntimeRecord;

it("takes a JPEG, a PNG and a scaled screenshot, with the desktop's key, asking again until each answers", async () => {
  let failures = 2;
  const server = await cmdServer(() => {
    if (failures-- > 0) return [200, { success: false, error: "The desktop is not up yet" }];
    return [200, { success: true, content: { image_data: "…" } }];
  });
  expect(await warmUp(record(server.url), 10_000)).toBe("warm");
  expect(server.asked.map((a) => a.params)).toEqual([
    { format: "jpeg" },
    { format: "jpeg" },
    ...WARM_UP_SCREENSHOTS,
  ]);
  expect(new Set(server.asked.map((a) => `${a.command} ${a.key}`))).toEqual(new Set(["screenshot k1"]));
});

it("gives up when the time runs out, saying which screenshot did not answer and why", async () => {
  const server = await cmdServer(({ params }) =>
    (params as { format: string }).format === "png"
      ? [500, { success: false, error: "no encoder" }]
      : [200, { success: true }],
  );
  await expect(warmUp(record(server.url), 800)).rejects.toThrow(
    /desk did not answer its warm-up screenshot \(\{"format":"png"\}\): HTTP 500: .*no encoder/,
  );
});

it("has nothing to warm on a server without commands, and refuses a desktop without a server", async () => {
  // Not found, or a static server's answer to a POST (busybox httpd, the light Pods': 501).
  for (const status of [404, 405, 501]) {
    const server = await cmdServer(() => [status, { message: "no commands here" }]);
    expect(await warmUp(record(server.url), 5_000)).toBe("no commands");
  }
  await expect(warmUp(record(null))).rejects.toThrow("desk has no computer server to warm up");
});
