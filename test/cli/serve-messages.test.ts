/** What a person reads from `hangar serve` and `hangar host serve`: a line when listening, errors in words. */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it, vi } from "vitest";
import { startCli } from "../support/cli-process.js";

const dir = mkdtempSync(join(tmpdir(), "hangar-cli-messages-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const hangar = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, ["bin/hangar.js", ...args], {
    encoding: "utf8",
    env: { ...process.env, ...env },
  });

/** Starts the CLI and returns the first line it prints on stdout once it listens; then stops it. */
async function firstLine(args: string[], env: Record<string, string> = {}) {
  const cli = await startCli(args, { ...process.env, ...env });
  try {
    return await vi.waitFor(
      () => {
        expect(cli.stdout()).toContain("\n");
        return cli.stdout().split("\n")[0];
      },
      { timeout: 10_000 },
    );
  } finally {
    await cli.stop();
  }
}

describe("messages of the servers", () => {
  it("serve says in one line where it listens, in which mode, on which display and backend", async () => {
    const line = await firstLine(["serve", "--port", "0", "--no-virtual-display"], { DISPLAY: ":999" });
    expect(line).toMatch(
      /^Hangar computer server on http:\/\/127\.0\.0\.1:\d+ \(local mode: no authentication, loopback pages only; display :999; x11 backend\)$/,
    );
  });

  it("host serve says where it listens and whether a token is required", async () => {
    const home = join(dir, "home");
    const line = await firstLine(["host", "serve", "--port", "0"], {
      HOME: home,
      XDG_CONFIG_HOME: join(home, "config"),
    });
    expect(line).toMatch(
      /^Hangar host service on http:\/\/127\.0\.0\.1:\d+ \(no token; settings .*config\.yaml\)$/,
    );
  });

  it("names the log levels that exist", () => {
    const r = hangar(["serve", "--log-level", "loud"]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(
      /'loud' is invalid\. Allowed choices are trace, debug, info, warn, error, fatal, silent/,
    );
  });

  it("names the state directory it cannot create, and how to choose another", () => {
    const file = join(dir, "not-a-directory");
    writeFileSync(file, "");
    const r = hangar(
      ["serve", "--cloud", "--container-name", "vm-1", "--port", "0", "--no-virtual-display"],
      {
        XDG_STATE_HOME: file,
        HANGAR_API_KEYS: "sk-messages-test",
      },
    );
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      `hangar: cannot create ${join(file, "hangar", "tls")} for the self-signed certificate (ENOTDIR): ` +
        "set XDG_STATE_HOME to a writable directory, or give a certificate with --tls-cert and --tls-key\n",
    );
  });
});
