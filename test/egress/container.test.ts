/**
 * A caged container desktop (docs/egress.md), end to end: a real host service, a real podman
 * (test/host/podman.ts) running the project's image, and a world network namespace of the test's
 * own (world.ts) as the only "internet", whose DNS the proxy resolves with. The desktop's own
 * programs, run through its computer server's `run_command` as an agent would, try names and
 * addresses; the host's audit and the desktop's answers are checked.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestEngine } from "../host/podman.js";
import { eventually, type TestHost } from "../host/support.js";
import { CONTAINER_DESKTOP, startCagedHost, startDesktop, stopCagedHost } from "./caged-host.js";
import { expectAllowedNameOnly, expectRefusalInTimeline, inDesktop } from "./desktop-probe.js";
import type { World } from "./world.js";

const run = promisify(execFile);
const NAME = "caged";
let world: World;
let engine: TestEngine;
let host: TestHost;
let desktop: { name: string; computerServerUrl: string; apiKey?: string };

beforeAll(async () => {
  ({ world, engine, host } = await startCagedHost(
    ["allowed.example.test", "other.example.test", "evil.example.net"],
    {
      "loop.example.test": "127.0.0.1",
    },
  ));
  desktop = await startDesktop(host, NAME, {
    egress: { allow: ["allowed.example.test", "loop.example.test"] },
  });
}, 300_000);

// Deleting the desktop takes its network, bridge and filter rules with it (checked below too).
afterAll(() => stopCagedHost({ world, engine, host }, [NAME]));

const events = async () => (await host.api("GET", `/svc/vms/${NAME}/egress`)).body.events as any[];

describe("a container desktop caged by its policy", () => {
  it("shows its policy and proxy in its record", async () => {
    const record = (await host.api("GET", `/svc/vms/${NAME}`)).body;
    expect(record.network).toMatchObject({
      egress: { allow: ["allowed.example.test", "loop.example.test"] },
      dns: true,
      caged: true,
    });
    expect(record.network.proxy).toMatch(/^\d+\.\d+\.\d+\.\d+:3128$/);
  });

  it("reaches an allowed name by its name and through the proxy; others are refused with the reason audited", async () => {
    await expectAllowedNameOnly(desktop);
    const log = await events();
    expect(log).toContainEqual(
      expect.objectContaining({
        via: "connect",
        name: "evil.example.net",
        port: 443,
        allowed: false,
        rule: "not in the allow list",
      }),
    );
    expect(log).toContainEqual(
      expect.objectContaining({ via: "dns", name: "evil.example.net", allowed: false }),
    );
    await eventually(async () =>
      (await events()).some(
        (e) => e.via === "tls" && e.name === "allowed.example.test" && e.allowed && e.bytesIn > 0,
      ),
    );
  });

  it("shows each decision in the desktop's own timeline, beside the command that tried it", async () => {
    await expectRefusalInTimeline(desktop, "refused evil.example.net:443 (not in the allow list)");
  });

  it("refuses a name pointing at the host's loopback, and raw TCP to any address not listed", async () => {
    const seen = await inDesktop(
      desktop,
      `return {
      loop: await viaProxy("loop.example.test:443"),
      raw: await tcp("${world.unlisted}", 7000),
      rawProxied: await viaProxy("${world.unlisted}:7000"),
      gatewaySsh: await tcp(new URL(process.env.https_proxy).hostname, 22),
    }`,
    );
    expect(seen.loop.status).toBe(403);
    expect(seen.loop.body).toContain("resolves to 127.0.0.1");
    // No route out of the cage: the address is not even tried.
    expect(["ENETUNREACH", "EHOSTUNREACH", "timeout"]).toContain(seen.raw);
    expect(seen.rawProxied.status).toBe(403);
    // The gateway is the host: everything but the gate's ports is refused by its filter.
    expect(["ECONNREFUSED", "EHOSTUNREACH", "timeout"]).toContain(seen.gatewaySsh);
  });

  it("takes a changed policy for its next connection, while it runs", async () => {
    const changed = await host.api("PUT", `/svc/vms/${NAME}/network`, {
      egress: { allow: ["allowed.example.test", "evil.example.net", `${world.unlisted}/32:7000`] },
    });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body.network.egress.allow).toContain("evil.example.net");
    const seen = await inDesktop(
      desktop,
      `return {
      evil: await byName("https://evil.example.net/now"),
      rawProxied: await viaProxy("${world.unlisted}:7000"),
    }`,
    );
    expect(JSON.parse(seen.evil.body)).toMatchObject({ server: "evil.example.net", path: "/now" });
    expect(seen.rawProxied.status).toBe(200);

    expect((await host.api("PUT", `/svc/vms/${NAME}/network`, { egress: "deny" })).status).toBe(200);
    const denied = await inDesktop(
      desktop,
      `return { allowed: await viaProxy("allowed.example.test:443"), dns: await lookup("allowed.example.test") }`,
    );
    expect(denied.allowed.status).toBe(403);
    expect(denied.allowed.body).toContain("(egress deny)");
    expect(denied.dns).toBe("ENOTFOUND");
  });

  it("answers bad input with a clear 400 and keeps the policy it had", async () => {
    const before = (await host.api("GET", `/svc/vms/${NAME}/network`)).body;
    const cases: [unknown, RegExp][] = [
      [{ egress: { allow: ["exa mple.com"] } }, /egress\.allow\.0: 'exa mple\.com' is not a valid domain/],
      [
        { egress: { allow: ["10.0.0.0/33"] } },
        /egress\.allow\.0: '10\.0\.0\.0\/33': the prefix length of an IPv4 CIDR is from 0 to 32/,
      ],
      [{ egress: { allow: ["example.com:99999"] } }, /a port is from 1 to 65535/],
      [{ egress: "open" }, /egress: expected "deny", "allow" or \{"allow"/],
      [
        {
          egress: { allow: ["allowed.example.test"] },
          credentials: [{ domain: "api.example.test", secret: "token" }],
        },
        /credentials\.0\.domain: 'api\.example\.test' is not allowed by this policy's egress/,
      ],
    ];
    for (const [body, message] of cases) {
      const res = await host.api("PUT", `/svc/vms/${NAME}/network`, body);
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/^Invalid network policy: /);
      expect(res.body.message).toMatch(message);
    }
    const unknown = await host.api("PUT", "/svc/vms/no-such-desktop/network", { egress: "deny" });
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toBe("Virtual machine not found: no-such-desktop");
    expect((await host.api("GET", `/svc/vms/${NAME}/network`)).body).toEqual(before);
  });
});

describe("a container desktop made without a policy", () => {
  it("is on the open network, says so, and cannot be caged while it exists", async () => {
    const created = await host.api("POST", "/svc/vms", { name: "open", ...CONTAINER_DESKTOP });
    expect(created.status).toBe(200);
    const record = (await host.api("GET", "/svc/vms/open")).body;
    expect(record.network).toEqual({
      egress: "allow",
      dns: true,
      credentials: [],
      caged: false,
      proxy: null,
    });
    const cage = await host.api("PUT", "/svc/vms/open/network", { egress: "deny" });
    expect(cage.status).toBe(400);
    expect(cage.body.message).toMatch(/was made without a network policy/);
    expect((await host.api("DELETE", "/svc/vms/open")).status).toBe(200);
  });
});

describe("deleting a caged desktop", () => {
  it("removes its network, its bridge and the host's filter rules for it", async () => {
    const network = (await host.api("GET", `/svc/vms/${NAME}/network`)).body;
    const gateway = network.proxy.split(":")[0];
    const bridgeOf = async () =>
      (await run("ip", ["-o", "-4", "addr", "show"])).stdout
        .split("\n")
        .find((l) => l.includes(` ${gateway}/`))
        ?.split(/\s+/)[1];
    const bridge = await bridgeOf();
    expect(bridge).toMatch(/^hgr[0-9a-f]{12}$/);
    expect((await run("iptables", ["-S"])).stdout).toContain(`-i ${bridge} -j REJECT`);
    expect((await host.api("DELETE", `/svc/vms/${NAME}`)).status).toBe(200);
    expect(await bridgeOf()).toBeUndefined();
    expect((await run("iptables", ["-S"])).stdout).not.toContain(`${bridge}`);
    expect((await run("ip6tables", ["-S"])).stdout).not.toContain(`${bridge}`);
    expect(await engine.podman("network", "ls", "--format", "{{.Name}}")).not.toContain(
      `hangar-egress-${NAME}`,
    );
  });
});

describe("a pool of caged desktops", () => {
  it("gives each desktop it makes the pool's policy; a bad policy is a 400 naming it", async () => {
    const bad = await host.api("POST", "/svc/pools", {
      name: "bad-pool",
      runtime: "container",
      size: 1,
      network: { egress: { allow: ["10.0.0.0/40"] } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/network\.egress\.allow\.0: '10\.0\.0\.0\/40'/);
    const made = await host.api("POST", "/svc/pools", {
      name: "caged-pool",
      runtime: "container",
      size: 1,
      memory: "1GB",
      network: { egress: { allow: ["allowed.example.test"] } },
    });
    expect(made.status, made.text).toBe(201);
    const member = await eventually(
      async () => (await host.api("GET", "/svc/pools/caged-pool")).body.desktops?.[0]?.name,
    );
    const record = await eventually(async () => {
      const res = await host.api("GET", `/svc/vms/${member}`);
      return res.status === 200 && res.body;
    });
    expect(record.network).toMatchObject({ egress: { allow: ["allowed.example.test"] }, caged: true });
    expect((await host.api("GET", "/svc/pools/caged-pool")).body.spec.network).toEqual({
      egress: { allow: ["allowed.example.test"] },
    });
    expect((await host.api("DELETE", "/svc/pools/caged-pool")).status).toBe(200);
  });
});
