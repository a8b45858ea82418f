/**
 * A caged QEMU desktop (docs/egress.md): the tiny guest of the snapshot tests (scripts/tiny-guest.sh)
 * with one more route, `/run/<URL-safe base64>`, that runs a shell line in the guest and answers its
 * output (base64 in a JSON string), so that the guest's own busybox `wget` and `nc` try names and addresses from inside.
 * Its network is user-mode with `restrict=on`; the only way out is the gate at 10.0.2.100. The
 * world (world.ts) is a network namespace of the test's own.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../host/support.js";
import { bootTinyGuest, TINY_VM, tinyGuest } from "../host/tiny-guest.js";
import { startWorld, type World } from "./world.js";

let world: World;
let host: TestHost;
let guestDir: string;
let serverUrl: string;
const NAME = "caged-vm";

/** The tiny guest with `/run/<base64url>` added to its HTTP handler. */
function probingGuest(): string {
  const source = tinyGuest();
  const dir = mkdtempSync(join(tmpdir(), "hangar-probing-guest-"));
  const root = join(dir, "root");
  execFileSync("sh", [
    "-c",
    `mkdir -p "$1" && cd "$1" && gzip -dc "$2" | busybox cpio -id 2>/dev/null`,
    "sh",
    root,
    join(source, "initramfs.cpio.gz"),
  ]);
  const handler = readFileSync(join(root, "handler"), "utf8").replace(
    "  *) reply",
    `  /run/*)
    line=$(echo "\${path#/run/}" | tr '_-' '/+' | base64 -d 2>/dev/null)
    out=$(sh -c "$line" 2>&1 | head -c 4000 | base64 | tr -d '\\n')
    reply "200 OK" "\\"$out\\"" ;;
  *) reply`,
  );
  writeFileSync(join(root, "handler"), handler, { mode: 0o755 });
  execFileSync("sh", [
    "-c",
    `cd "$1" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 >"$2"`,
    "sh",
    root,
    join(dir, "initramfs.cpio.gz"),
  ]);
  execFileSync("cp", [join(source, "vmlinuz"), join(dir, "vmlinuz")]);
  return dir;
}

/** Runs a shell line in the guest; what it printed (the guest sends it in base64). */
async function inGuest(line: string): Promise<string> {
  // base64 with its padding (busybox's decoder needs it), in URL-safe letters.
  const encoded = Buffer.from(line).toString("base64").replace(/\+/g, "-").replace(/\//g, "_");
  const res = await fetch(new URL(`/run/${encoded}`, serverUrl), { signal: AbortSignal.timeout(30_000) });
  expect(res.status).toBe(200);
  return Buffer.from((await res.json()) as string, "base64").toString();
}

const events = async () => (await host.api("GET", `/svc/vms/${NAME}/egress`)).body.events as any[];

beforeAll(async () => {
  world = await startWorld(["allowed.example.test", "evil.example.net"], {
    "loop.example.test": "127.0.0.1",
  });
  guestDir = probingGuest();
  host = await startTestHost({ egressResolvers: [world.dns] });
  const created = await host.api("POST", "/svc/vms", {
    name: NAME,
    ...TINY_VM,
    network: { egress: { allow: ["allowed.example.test", "loop.example.test"] } },
  });
  expect(created.status, created.text).toBe(200);
  bootTinyGuest(join(host.home, NAME), guestDir);
  expect((await host.api("POST", `/svc/vms/${NAME}/run`, { noDisplay: true })).status).toBe(202);
  const ready = await host.api("GET", `/svc/vms/${NAME}?wait=ready&timeout=170`);
  expect(ready.status, ready.text).toBe(200);
  serverUrl = ready.body.computerServerUrl;
}, 240_000);

afterAll(async () => {
  await host?.api("DELETE", `/svc/vms/${NAME}`).catch(() => undefined);
  await host?.cleanup();
  await world?.cleanup();
  if (guestDir) await rm(guestDir, { recursive: true, force: true });
});

describe("a QEMU desktop caged by its policy", () => {
  it("runs with a restricted user-mode network whose only way out is its gate", async () => {
    const record = (await host.api("GET", `/svc/vms/${NAME}`)).body;
    expect(record.network).toMatchObject({ caged: true, proxy: "10.0.2.100:3128" });
    const cmdline = execFileSync(
      "sh",
      ["-c", `cat /proc/$(cat "$1")/cmdline | tr '\\0' ' '`, "sh", join(host.home, NAME, "qemu.pid")],
      {
        encoding: "utf8",
      },
    );
    expect(cmdline).toContain("restrict=on");
    expect(cmdline).toContain("guestfwd=tcp:10.0.2.100:3128-cmd:");
  });

  it("tells the guest its gate and its CA through fw_cfg (the guest image's resolver and trust)", async () => {
    const cfg = "/sys/firmware/qemu_fw_cfg/by_name/opt/hangar";
    expect(await inGuest(`cat ${cfg}/egress-gate/raw`)).toBe("10.0.2.100");
    const ca = readFileSync(join(host.home, ".egress", "ca", NAME, "ca.crt"), "utf8");
    expect(ca).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(await inGuest(`cat ${cfg}/egress-ca/raw`)).toBe(ca);
  });

  it("reaches an allowed name through the proxy and by name; others are refused and audited", async () => {
    const proxied = await inGuest(
      "http_proxy=http://10.0.2.100:3128 wget -q -O - http://allowed.example.test/p",
    );
    expect(JSON.parse(proxied)).toMatchObject({ host: "allowed.example.test", path: "/p" });
    const byName = await inGuest(
      "(printf 'GET /n HTTP/1.0\\r\\nHost: allowed.example.test\\r\\n\\r\\n'; sleep 2) | nc -w 5 10.0.2.100 80",
    );
    expect(byName).toContain('"path":"/n"');
    const evil = await inGuest(
      "http_proxy=http://10.0.2.100:3128 wget -q -O - http://evil.example.net/ ; echo exit=$?",
    );
    expect(evil).toContain("exit=1");
    expect(await events()).toContainEqual(
      expect.objectContaining({
        via: "proxy",
        name: "evil.example.net",
        port: 80,
        allowed: false,
        rule: "not in the allow list",
      }),
    );
  });

  it("refuses a name pointing at the host's loopback and raw TCP to an unlisted address", async () => {
    const loop = await inGuest(
      "printf 'CONNECT loop.example.test:443 HTTP/1.1\\r\\n\\r\\n' | nc -w 5 10.0.2.100 3128",
    );
    expect(loop).toContain("403");
    expect(loop).toContain("resolves to 127.0.0.1");
    // Straight to the address: user-mode networking with restrict=on lets nothing out.
    const raw = await inGuest(`echo hi | nc -w 3 ${world.unlisted} 7000 ; echo exit=$?`);
    expect(raw).not.toContain("echo ");
    const proxied = await inGuest(
      `printf 'CONNECT ${world.unlisted}:7000 HTTP/1.1\\r\\n\\r\\n' | nc -w 5 10.0.2.100 3128`,
    );
    expect(proxied).toContain("403");
  });

  it("takes a changed policy for its next connection, while it runs", async () => {
    const changed = await host.api("PUT", `/svc/vms/${NAME}/network`, {
      egress: { allow: ["evil.example.net", `${world.unlisted}:7000`] },
    });
    expect(changed.status, changed.text).toBe(200);
    const evil = await inGuest("http_proxy=http://10.0.2.100:3128 wget -q -O - http://evil.example.net/now");
    expect(JSON.parse(evil)).toMatchObject({ host: "evil.example.net", path: "/now" });
    const echo = await inGuest(
      `(printf 'CONNECT ${world.unlisted}:7000 HTTP/1.1\\r\\n\\r\\n'; sleep 1; echo ping) | nc -w 3 10.0.2.100 3128`,
    );
    expect(echo).toContain("200 Connection Established");
    expect(echo).toContain(`echo ${world.unlisted}`);
    const allowedNow = await inGuest(
      "http_proxy=http://10.0.2.100:3128 wget -q -O - http://allowed.example.test/ ; echo exit=$?",
    );
    expect(allowedNow).toContain("exit=1");
  });
});
