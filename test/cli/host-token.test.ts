/**
 * `hangar host serve --token-file` and the `hangar vm …` client with the token in the environment,
 * in a file or missing; and the refusal to listen beyond loopback without a token.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningCli, startCli } from "../support/cli-process.js";

const TOKEN = "f00dfeedf00dfeedf00dfeedf00dfeed";
let root: string;
let service: RunningCli;
let url: string;

const env = () => ({
  ...process.env,
  HOME: root,
  XDG_CONFIG_HOME: join(root, "config"),
  HANGAR_HOST_TOKEN: "",
});
const hangar = (args: string[], extraEnv: Record<string, string> = {}) =>
  spawnSync(process.execPath, ["bin/hangar.js", ...args], {
    encoding: "utf8",
    env: { ...env(), ...extraEnv },
  });

const startService = (args: string[]) => startCli(["host", "serve", "--port", "0", ...args], env());

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "hangar-token-"));
  writeFileSync(join(root, "token"), `${TOKEN}\n`, { mode: 0o600 });
  service = await startService(["--token-file", join(root, "token")]);
  url = service.url;
  const log = service.log();
  expect(log).not.toContain(TOKEN);
});

// The service outlived the suite: a `host serve` was left running after every test run.
afterAll(async () => {
  await service?.stop();
  rmSync(root, { recursive: true, force: true });
});

describe("the host service's token on the command line", () => {
  it("is sent by hangar vm from HANGAR_HOST_TOKEN or --token-file", () => {
    const fromEnv = hangar(["vm", "ls", "--json", "--url", url], { HANGAR_HOST_TOKEN: TOKEN });
    expect(fromEnv.stderr).toBe("");
    expect(JSON.parse(fromEnv.stdout)).toEqual([]);
    const fromFile = hangar(["vm", "ls", "--json", "--url", url, "--token-file", join(root, "token")]);
    expect(JSON.parse(fromFile.stdout)).toEqual([]);
  });

  it("is asked for in words when missing or wrong", () => {
    const missing = hangar(["vm", "ls", "--url", url]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toBe(
      `hangar: The host service at ${url} needs its token: set HANGAR_HOST_TOKEN or pass --token-file\n`,
    );
    const wrong = hangar(["vm", "ls", "--url", url], { HANGAR_HOST_TOKEN: "not-the-token-at-all" });
    expect(wrong.stderr).toBe(`hangar: The host service at ${url} refused the token\n`);
  });

  it("must be there to listen beyond loopback, unless --no-auth says so", async () => {
    const refused = hangar(["host", "serve", "--host", "0.0.0.0", "--port", "0"]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/^hangar: listening on 0\.0\.0\.0 without a token .* --token-file FILE/);
    const unreadable = hangar(["host", "serve", "--port", "0", "--token-file", join(root, "missing")]);
    expect(unreadable.stderr).toBe(
      `hangar: cannot read the token file: No such file or directory: ${join(root, "missing")}\n`,
    );
    const open = await startService(["--host", "0.0.0.0", "--no-auth"]);
    try {
      expect(open.log()).toMatch(/NO AUTHENTICATION/);
    } finally {
      await open.stop();
    }
  });
});
