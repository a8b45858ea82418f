/**
 * A caged desktop on the project's guest image (docs/egress.md), end to end: a QEMU VM made with a
 * network policy and a credential rule boots, learns its gate and CA through fw_cfg
 * (deploy/systemd/hangar-egress-trust), resolves the allowed name through the gate over TCP, and
 * OpenSSL in the guest verifies the gate's certificate against the system store (no -k) and gets
 * the world's answer with the credential the gate added; the desktop user's NSS database (Chromium's)
 * holds the CA; a name the policy does not allow does not resolve. The world is a network namespace
 * of the test's own (test/egress/world.ts); nothing reaches any other address.
 *
 * Slow (a cold boot under TCG): only `npm run test:e2e` runs it.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { copySparse } from "../../src/host/qemu/sparse-copy.js";
import { type RunningHostService, startHostService } from "../../src/host/server.js";
import { expectRefusalInTimeline } from "../egress/desktop-probe.js";
import { startWorld, type World } from "../egress/world.js";
import { killQemusUnder } from "../host/support.js";
import { postCmd } from "../support/server.js";
import { GUEST_DESKTOP } from "./guest-image.js";
import { hostApi } from "./host-api.js";

const VM = "caged-guest";
const SECRET = `tok_${randomBytes(18).toString("hex")}`;
const SENT = createHash("sha256").update(`Bearer ${SECRET}`).digest("hex");
let dir: string;
let world: World;
let host: RunningHostService;
let url: string;

const svc = (method: string, path: string, body?: unknown) => hostApi(host.url, method, path, body);

async function inGuest(command: string): Promise<{ stdout: string; stderr: string; return_code: number }> {
  const ran = await postCmd(url, { command: "run_command", params: { command, timeout: 60 } });
  expect(ran.event?.success, JSON.stringify(ran.event).slice(0, 400)).toBe(true);
  return ran.event as { stdout: string; stderr: string; return_code: number };
}

beforeAll(async () => {
  const built = inject("guestImage");
  world = await startWorld(["api.example.test", "other.example.test"]);
  dir = await mkdtemp(join(tmpdir(), "hangar-e2e-egress-"));
  host = await startHostService({
    port: 0,
    configHome: join(dir, "config"),
    userHome: dir,
    defaultHomeDirectory: join(dir, "vms"),
    egressResolvers: [world.dns],
    egressTrust: [world.caPem],
  });
  expect((await svc("POST", "/svc/secrets", { name: "api-token", value: SECRET })).status).toBe(201);
  const created = await svc("POST", "/svc/vms", {
    name: VM,
    ...GUEST_DESKTOP,
    network: {
      egress: { allow: ["api.example.test"] },
      credentials: [{ domain: "api.example.test", secret: "api-token" }],
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(200);
  await copySparse(built.path, join(dir, "vms", VM, "disk.img"));
  expect((await svc("POST", `/svc/vms/${VM}/run`, {})).status).toBe(202);
  const ready = await svc("GET", `/svc/vms/${VM}?wait=ready&timeout=900`);
  expect(ready.status, JSON.stringify(ready.body)).toBe(200);
  url = ready.body.computerServerUrl;
}, 20 * 60_000);

afterAll(async () => {
  await host?.close();
  if (dir) {
    await killQemusUnder(dir);
    await rm(dir, { recursive: true, force: true });
  }
  await world?.cleanup();
}, 120_000);

describe("a caged guest desktop", () => {
  it("resolves through its gate, trusts its CA, and its requests get the credential it never sees", async () => {
    expect((await inGuest("cat /etc/resolv.conf")).stdout).toBe("nameserver 10.0.2.100\noptions use-vc\n");
    const resolved = await inGuest("getent hosts api.example.test");
    expect(resolved.stdout, resolved.stderr).toMatch(/api\.example\.test/);

    // OpenSSL verifies the gate's certificate for the name against the system's store.
    const verified = await inGuest(
      "openssl s_client -verify_return_error -servername api.example.test -connect api.example.test:443 </dev/null 2>&1",
    );
    expect(verified.stdout, verified.stdout).toMatch(/Verify return code: 0 \(ok\)/);
    expect(verified.stdout).toMatch(/Hangar egress CA \(caged-guest\)/);
    // Node (the CA in NODE_EXTRA_CA_CERTS, from the server's environment) gets the world's answer,
    // with the credential.
    const fetched = await inGuest(
      `node -e 'fetch("https://api.example.test/v1/me").then(async (r) => console.log(r.status, await r.text()), (e) => console.log("failed", e.cause?.code ?? e.message))'`,
    );
    const [status, ...body] = fetched.stdout.trim().split(" ");
    expect(status, fetched.stdout + fetched.stderr).toBe("200");
    expect(JSON.parse(body.join(" "))).toMatchObject({
      server: "api.example.test",
      path: "/v1/me",
      authorization: SENT,
    });
    // Chromium's store, the desktop user's NSS database, holds it too.
    expect((await inGuest('certutil -d "sql:$HOME/.pki/nssdb" -L')).stdout).toMatch(/Hangar egress/);

    // A name the policy does not allow has no address in the guest.
    expect((await inGuest("getent hosts other.example.test; echo $?")).stdout.trim()).not.toBe("0");
    // The guest's own timeline shows the refusal beside that command (the guest keeps its own clock).
    await expectRefusalInTimeline(
      { name: VM, computerServerUrl: url },
      "refused the name other.example.test",
      false,
    );
    // The guest's agent is hangar, and so are the programs on its display that start others (the
    // window manager's and the panel's menus); the server is root's.
    expect((await inGuest("id -un")).stdout).toBe("hangar\n");
    expect((await inGuest("ps -o user= -C openbox,lxpanel | sort -u")).stdout).toBe("hangar\n");
    // The secret is nowhere the agent can read.
    // Given in base64, so that the search's own command line does not hold it.
    const encoded = Buffer.from(SECRET).toString("base64");
    const search = await inGuest(
      `s=$(echo ${encoded} | base64 -d); grep -rlF "$s" /etc /home /tmp /run 2>/dev/null; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -cF "$s"`,
    );
    expect(search.stdout.trim()).toBe("0");
  });
});
