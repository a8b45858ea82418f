/**
 * `hangar host serve --token-file` and the `hangar vm …` client with the token in the environment,
 * in a file or missing; and the refusal to listen beyond loopback without a token.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const TOKEN = "f00dfeedf00dfeedf00dfeedf00dfeed";
let root: string;
let service: ChildProcess;
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

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), "hangar-token-"));
  writeFileSync(join(root, "token"), `${TOKEN}\n`, { mode: 0o600 });
  const started = await startService(["--token-file", join(root, "token")]);
  service = started.child;
  url = started.url;
  const log = started.log();
  expect(log).not.toContain(TOKEN);
});

/** Starts `hangar host serve` with these arguments; resolves with its URL and log once it listens. */
async function startService(args: string[]) {
  const child = spawn(process.execPath, ["bin/hangar.js", "host", "serve", "--port", "0", ...args], {
    stdio: ["ignore", "ignore", "pipe"],
    env: env(),
  });
  let log = "";
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (d) => {
      log += String(d);
      const m = /"url":"(http:\/\/[\d.]+:\d+)"/.exec(log);
      if (m) resolve(m[1]);
    });
    child.once("exit", (code) => reject(new Error(`exited ${code}: ${log}`)));
  });
  return { child, url, log: () => log };
}

async function stop(child: ChildProcess) {
  if (child.exitCode !== null) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  await exited;
}

afterAll(async () => {
  await stop(service);
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
      await stop(open.child);
    }
  });
});
