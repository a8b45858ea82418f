import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { describe, expect, it } from "vitest";

const hangar = (args: string[]) =>
  spawnSync(process.execPath, ["bin/hangar.js", ...args], { encoding: "utf8" });

describe("the hangar command line", () => {
  it("explains itself with --help", () => {
    const r = hangar(["--help"]);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/Usage: hangar/);
    expect(r.stdout).toMatch(/serve/);
    const serve = hangar(["serve", "--help"]);
    expect(serve.stdout).toMatch(/--port <port>/);
    expect(serve.stdout).toMatch(/--host <address>/);
  });

  it("prints the version", () => {
    expect(hangar(["--version"]).stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });

  it("says what is wrong with a bad option, without a stack trace", () => {
    const r = hangar(["serve", "--port", "eighty"]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/port/);
    expect(r.stderr).not.toMatch(/at .*\.js:\d+/);
    const size = hangar(["serve", "--port", "0", "--body-limit", "lots"]);
    expect(size.status).toBe(1);
    expect(size.stderr).toMatch(/^hangar: Invalid size "lots"/);
  });

  it("serve listens on loopback, logs where, answers, and stops cleanly on SIGTERM", async () => {
    const child = spawn(process.execPath, ["bin/hangar.js", "serve", "--port", "0"], {
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, DISPLAY: process.env.DISPLAY ?? "" },
    });
    let log = "";
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr.on("data", (d) => {
        log += String(d);
        const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(log);
        if (m) resolve(m[1]);
      });
      child.once("exit", (code) => reject(new Error(`exited ${code}: ${log}`)));
    });
    const status = await (await fetch(`${url}/status`)).json();
    expect(status.status).toBe("ok");
    child.kill("SIGTERM");
    const [code] = await once(child, "exit");
    expect(code).toBe(0);
  });
});
