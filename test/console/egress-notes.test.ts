/**
 * The host's egress decisions in the desktop's timeline: `POST /activity/egress` on a real computer
 * server (as entries between the commands, in words, checked field by field, behind the key), and
 * the host service's feed (src/host/egress/timeline-feed.ts) that sends each audit event there —
 * to a running desktop only.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allCommands } from "../../commands/index.js";
import { ActivityLog } from "../../src/computer/core/activity.js";
import { startComputerServer } from "../../src/computer/server.js";
import { EgressAudit } from "../../src/host/egress/audit.js";
import { EgressTimelineFeed } from "../../src/host/egress/timeline-feed.js";
import { HostLog } from "../../src/host/host-log.js";
import { REFUSED_EVENT } from "../support/egress-events.js";
import { startTestServer } from "../support/server.js";

type Server = Awaited<ReturnType<typeof startTestServer>>;
let server: Server;
beforeAll(async () => {
  server = await startTestServer({ activitySize: 8 });
});
afterAll(() => server.close());

const entries = async (url: string, headers: Record<string, string> = {}) =>
  ((await (await fetch(`${url}/activity`, { headers })).json()) as { entries: any[] }).entries;

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${url}/activity/egress`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

const refused = REFUSED_EVENT;
const allowed = {
  via: "tls",
  name: "api.example.com",
  address: "203.0.113.7",
  port: 443,
  allowed: true,
  rule: "api.example.com",
  bytesOut: 812,
  bytesIn: 52_400,
  credential: "api-token",
};

describe("POST /activity/egress", () => {
  it("puts each decision in the timeline, in words, after the command that came before it", async () => {
    await server.cmd("version");
    const res = await post(server.url, { events: [refused, allowed] });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ added: 2 });
    const list = (await entries(server.url)).slice(-3);
    expect(list.map((e) => [e.transport, e.command, e.success, e.text])).toEqual([
      ["http", "version", true, undefined],
      ["egress", "refused", false, "refused evil.example.net:443 (not in the allow list)"],
      [
        "egress",
        "allowed",
        true,
        "allowed api.example.com:443 (api.example.com), with the credential api-token, 812 B out, 52.4 kB in",
      ],
    ]);
    expect(list[1].params).toMatchObject({ via: "connect", name: "evil.example.net", port: 443 });
    // The credential's name is redacted as any secret-looking parameter is; never its value (the host has it).
    expect(list[2].params.credential).toBe("[redacted]");
  });

  it("answers bad input with a 400 that names it, and adds nothing", async () => {
    const before = (await entries(server.url)).at(-1).id;
    const cases: [unknown, string][] = [
      ["{not json", "JSON"],
      [{ events: "x" }, "events"],
      [{ events: [{ ...refused, port: 70_000 }] }, "events.0.port"],
      [{ events: [{ ...refused, via: "carrier pigeon" }] }, "events.0.via"],
      [{ events: Array.from({ length: 201 }, () => refused) }, "events"],
    ];
    for (const [body, named] of cases) {
      const res = await post(server.url, body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect((await res.json()).detail).toContain(named);
    }
    expect((await entries(server.url)).at(-1).id).toBe(before);
  });

  it("refuses a page of another site and a foreign Host (DNS rebinding), as every route", async () => {
    const before = (await entries(server.url)).at(-1).id;
    const res = await post(server.url, { events: [refused] }, { origin: "https://evil.example.net" });
    expect(res.status).toBe(403);
    // fetch will not send another Host: node:http does.
    const { port } = new URL(server.url);
    const foreignHost = await new Promise<number | undefined>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port,
          path: "/activity/egress",
          method: "POST",
          headers: { host: `evil.example.net:${port}`, "content-type": "application/json" },
        },
        (reply) => {
          reply.resume();
          resolve(reply.statusCode);
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ events: [refused] }));
    });
    expect(foreignHost).toBe(403);
    expect((await entries(server.url)).at(-1).id).toBe(before);
  });

  it("needs the key in cloud mode", async () => {
    const KEY = "sk-hangar-egress-notes-5b1";
    const cloud = await startComputerServer({
      port: 0,
      cloud: { containerName: "vm", keys: [KEY], limiter: false },
    });
    try {
      const auth = { "x-container-name": "vm", "x-api-key": KEY };
      expect((await post(cloud.url, { events: [refused] })).status).toBe(401);
      expect((await post(cloud.url, { events: [refused] }, auth)).status).toBe(200);
      expect((await entries(cloud.url, auth)).map((e) => e.text)).toEqual([
        "refused evil.example.net:443 (not in the allow list)",
      ]);
    } finally {
      await cloud.close();
    }
  });
});

describe("notes in the activity log", () => {
  const version = allCommands.find((def) => def.name === "version")!;
  const command = (log: ActivityLog) =>
    log.record({
      command: "version",
      flags: version,
      params: {},
      transport: "http",
      ms: 1,
      outcome: { success: true, result: {} },
    });
  const note = (log: ActivityLog, i: number) =>
    log.note({
      transport: "egress",
      command: "refused",
      text: `refused n${i}:443`,
      params: {},
      success: false,
    });

  it("are not the desktop's use, and fill at most half the ring: the commands stay", () => {
    const log = new ActivityLog({ size: 6 });
    note(log, 0);
    expect(log.lastCommandAt).toBeUndefined();
    for (let i = 0; i < 3; i++) command(log);
    const at = log.lastCommandAt;
    for (let i = 1; i <= 20; i++) note(log, i);
    expect(log.lastCommandAt).toBe(at);
    const kept = log.since();
    expect(kept.filter((e) => e.text === undefined)).toHaveLength(3);
    expect(kept.filter((e) => e.text !== undefined).map((e) => e.text)).toEqual([
      "refused n18:443",
      "refused n19:443",
      "refused n20:443",
    ]);
    // Commands push out notes and commands alike, oldest first.
    for (let i = 0; i < 6; i++) command(log);
    expect(log.since().every((e) => e.text === undefined)).toBe(true);
    note(log, 21);
    expect(log.since()).toHaveLength(6);
  });
});

describe("the host's feed", () => {
  let home: string;
  let log: HostLog;
  let audit: EgressAudit;
  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), "hangar-egress-feed-"));
    log = new HostLog(async () => home);
    audit = new EgressAudit(log);
  });
  afterAll(() => rm(home, { recursive: true, force: true }));

  const decision = (desktop: string, name: string) =>
    audit.record({
      desktop,
      via: "connect",
      name,
      address: null,
      port: 443,
      allowed: false,
      rule: "not in the allow list",
    });

  it("sends a running desktop's decisions to its computer server, many at once", async () => {
    const feed = new EgressTimelineFeed(
      audit,
      async (name) => ({ name, status: "running", computerServerUrl: server.url }),
      log,
    );
    try {
      for (let i = 0; i < 30; i++) decision("busy", `n${i}.example.net`);
      await expect
        .poll(async () =>
          (await entries(server.url)).filter((e) => e.transport === "egress").map((e) => e.text),
        )
        .toContain("refused n29.example.net:443 (not in the allow list)");
    } finally {
      feed.close();
    }
  });

  it("asks a server without the route once a start, not for every event", async () => {
    let asked = 0;
    const older = createServer((_req, res) => {
      asked++;
      res.writeHead(404).end("Not Found");
    });
    await new Promise<void>((resolve) => older.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(older.address() as { port: number }).port}`;
    let startedAt = "2026-12-04T10:00:00.000Z";
    const feed = new EgressTimelineFeed(
      audit,
      async (name) => ({ name, status: "running", startedAt, computerServerUrl: url }),
      log,
    );
    try {
      decision("older", "one.example.net");
      await expect.poll(() => asked).toBe(1);
      await expect.poll(() => feed.waiting).toBe(0);
      // The next batch is dropped without a request.
      decision("older", "two.example.net");
      await expect.poll(() => feed.waiting).toBe(0);
      expect(asked).toBe(1);
      // A new start of the desktop (another server, perhaps a newer one) is asked again.
      startedAt = "2026-12-04T11:00:00.000Z";
      decision("older", "three.example.net");
      await expect.poll(() => asked).toBe(2);
    } finally {
      feed.close();
      older.close();
    }
  });

  it("never knocks on a sleeping desktop's door: the log says the timeline was not told", async () => {
    let knocks = 0;
    const door = createServer((_req, res) => {
      knocks++;
      res.end();
    });
    await new Promise<void>((resolve) => door.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(door.address() as { port: number }).port}`;
    const feed = new EgressTimelineFeed(
      audit,
      async (name) => ({ name, status: "hibernated", computerServerUrl: url }),
      log,
    );
    try {
      decision("asleep", "evil.example.net");
      await expect
        .poll(async () => readFile(join(home, "info.log"), "utf8").catch(() => ""))
        .toMatch(/timeline was not told its egress events.*vm=asleep.*error="it is hibernated"/);
      expect(knocks).toBe(0);
    } finally {
      feed.close();
      door.close();
    }
  });
});
