/**
 * A memory snapshot is taken of a warm desktop: the VM service has the desktop's computer server
 * answer its first-use screenshots (warm-up.ts) just before the runtime saves the state, so that
 * every restore and fork starts warm. The runtime here is a stand-in that records when it was asked
 * for the snapshot; the computer server is a real HTTP server on loopback.
 */
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { HostLog } from "../host-log.js";
import { DesktopService } from "./desktop-service.js";
import type { RuntimeRecord, SnapshotCapability, SnapshottingRuntime } from "./runtime.js";
import { WARM_UP_SCREENSHOTS } from "./warm-up.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** What happened, in order: each `/cmd` the server answered, and the runtime's snapshot. */
type Event = { what: "cmd"; params: object } | { what: "snapshot"; name: string };

/** A computer server stand-in answering every screenshot with `status`. */
async function computerServer(events: Event[], status: number) {
  const server: Server = createServer((req, res) => {
    let text = "";
    req.on("data", (chunk) => {
      text += chunk;
    });
    req.on("end", () => {
      if (req.url === "/cmd") events.push({ what: "cmd", params: JSON.parse(text).params });
      const ok = status === 200;
      res.writeHead(status, { "content-type": "text/event-stream" });
      res.end(
        `data: ${JSON.stringify(ok ? { success: true, base64_image: "" } : { success: false, error: "no X" })}\n\n`,
      );
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** The VM service over one stand-in runtime whose desktop `desk` runs at `url`; its log's lines. */
function service(events: Event[], url: string, running: SnapshotCapability["running"]) {
  const record: RuntimeRecord = {
    name: "desk",
    status: "running",
    runtime: "qemu",
    computerServerUrl: url,
    startedAt: new Date().toISOString(),
    ready: true,
  } as RuntimeRecord;
  const runtime = {
    kind: "qemu",
    snapshots: { running },
    find: async (name: string) => (name === "desk" ? record : undefined),
    snapshot: async (name: string, snapshot: string) => {
      events.push({ what: "snapshot", name });
      return { name: snapshot, vm: name, createdAt: new Date().toISOString(), memory: true, bytes: 0 };
    },
    recover: async () => undefined,
    settled: async () => undefined,
    close: async () => undefined,
  } as unknown as SnapshottingRuntime;
  const logs = mkdtempSync(join(tmpdir(), "hangar-snapshot-warm-"));
  cleanups.push(() => rmSync(logs, { recursive: true, force: true }));
  const vms = new DesktopService(
    [runtime],
    "qemu",
    { pulling: () => undefined, pullFailure: () => undefined },
    new HostLog(async () => logs),
  );
  return { vms, log: () => readFileSync(join(logs, "info.log"), "utf8") };
}

it("has a running desktop's server answer its first-use screenshots before its memory snapshot", async () => {
  const events: Event[] = [];
  const { vms, log } = service(events, await computerServer(events, 200), "memory");
  await vms.snapshot("desk", "warm");
  expect(events).toEqual([
    ...WARM_UP_SCREENSHOTS.map((params) => ({ what: "cmd", params })),
    { what: "snapshot", name: "desk" },
  ]);
  expect(log()).toMatch(/INFO: Desktop warmed for its snapshot vm=desk ms=\d+/);
});

it("takes the snapshot all the same when the server cannot be warmed, and logs why", async () => {
  const events: Event[] = [];
  const { vms, log } = service(events, await computerServer(events, 500), "memory");
  await vms.snapshot("desk", "cold");
  // One try: a desktop whose server fails is not held up.
  expect(events).toEqual([
    { what: "cmd", params: WARM_UP_SCREENSHOTS[0] },
    { what: "snapshot", name: "desk" },
  ]);
  expect(log()).toMatch(
    /ERROR: Desktop not warmed for its snapshot; taking it as it is vm=desk error=.*HTTP 500/,
  );
});

it("does not warm a desktop whose snapshots keep its disk only", async () => {
  const events: Event[] = [];
  const { vms } = service(events, await computerServer(events, 200), "disk");
  await vms.snapshot("desk", "files");
  expect(events).toEqual([{ what: "snapshot", name: "desk" }]);
});
