/**
 * `hangar vm create --network`, `vm network`, `vm get`, `vm egress` and `hangar secret` against a
 * real host service (a QEMU desktop made, never started: its policy is the service's to keep).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../host/support.js";
import { runCli } from "../support/cli-in-process.js";

let host: TestHost;
let dir: string;
beforeAll(async () => {
  host = await startTestHost();
  dir = mkdtempSync(join(tmpdir(), "hangar-egress-cli-"));
});
afterAll(async () => {
  await host.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

/** The CLI, in this process, against the test's service. */
const hangar = (...args: string[]) => runCli(...args, "--url", host.url);

describe("hangar vm network, vm egress, secret", () => {
  it("cages a desktop at create, shows and changes its policy", async () => {
    expect(
      await hangar(
        "vm",
        "create",
        "caged-cli",
        "--memory",
        "256MB",
        "--disk-size",
        "1GB",
        "--network",
        "deny",
      ),
    ).toBe("Created caged-cli.\n");
    expect(await hangar("vm", "network", "caged-cli")).toBe("deny; proxy 10.0.2.100:3128\n");
    expect(
      await hangar(
        "vm",
        "network",
        "caged-cli",
        '{"egress": {"allow": ["example.test", "*.example.org:443"]}}',
      ),
    ).toBe("caged-cli: allow example.test, *.example.org:443; proxy 10.0.2.100:3128\n");
    expect(await hangar("vm", "get", "caged-cli")).toMatch(
      /^network:\s+allow example\.test, \*\.example\.org:443; proxy/m,
    );
    await expect(
      hangar("vm", "network", "caged-cli", '{"egress": {"allow": ["bad domain"]}}'),
    ).rejects.toThrow(/Invalid network policy: egress\.allow\.0: 'bad domain' is not a valid domain/);
    expect(await hangar("vm", "egress", "caged-cli")).toBe("No connections of caged-cli yet.\n");
  });

  it("sets a secret from a file, lists its name and who uses it, and keeps its value", async () => {
    const file = join(dir, "token");
    writeFileSync(file, "s3cr3t-value\n");
    expect(await hangar("secret", "set", "api-token", "--from-file", file)).toBe("Secret set: api-token.\n");
    await hangar(
      "vm",
      "network",
      "caged-cli",
      '{"egress": {"allow": ["api.example.test"]}, "credentials": [{"domain": "api.example.test", "secret": "api-token"}]}',
    );
    const list = await hangar("secret", "ls");
    expect(list).toMatch(/^NAME\s+UPDATED\s+USED BY/);
    expect(list).toMatch(/api-token\s+\S+\s+caged-cli/);
    expect(list).not.toContain("s3cr3t");
    expect(JSON.stringify(await (await fetch(`${host.url}/svc/vms/caged-cli`)).json())).not.toContain(
      "s3cr3t",
    );
    await expect(hangar("secret", "rm", "api-token")).rejects.toThrow(
      /named by the network policy of caged-cli/,
    );
    expect(await hangar("vm", "rm", "caged-cli")).toBe("Deleted caged-cli.\n");
    expect(await hangar("secret", "rm", "api-token")).toBe("Deleted api-token.\n");
  });
});
