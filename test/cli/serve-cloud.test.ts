/** `hangar serve` cloud mode and TLS as a user starts it (the built CLI in a child process). */
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { postCommand, send } from "../support/clients.js";
import { makeTestCertificate } from "../support/tls.js";

const dir = mkdtempSync(join(tmpdir(), "hangar-cli-cloud-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Starts `hangar serve …` on port 0 and resolves with its URL and what it printed. */
async function serve(args: string[], env: Record<string, string>) {
  const child = spawn(
    process.execPath,
    ["bin/hangar.js", "serve", "--no-virtual-display", "--port", "0", ...args],
    {
      env: { ...process.env, ...env, HANGAR_LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => {
    out += String(d);
  });
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr.on("data", (d) => {
      err += String(d);
      const m = /"url":"(https?:\/\/127\.0\.0\.1:\d+)"/.exec(err);
      if (m) resolve(m[1]);
    });
    child.once("exit", (code) => reject(new Error(`exited ${code}: ${err}`)));
  });
  return {
    url,
    /** What it printed on stdout, once a line with `marker` has arrived (stdout and stderr race). */
    async stdoutWith(marker: string) {
      for (let i = 0; i < 100 && !out.includes(marker); i++) await new Promise((r) => setTimeout(r, 50));
      return out;
    },
    stderr: () => err,
    stop: async () => {
      child.kill("SIGTERM");
      await once(child, "exit");
    },
  };
}

describe("hangar serve in cloud mode", () => {
  it("--cloud makes a self-signed certificate once, prints its fingerprint and requires keys", async () => {
    const state = join(dir, "state");
    const env = { XDG_STATE_HOME: state, HANGAR_API_KEYS: "sk-cli-one,sk-cli-two" };
    const first = await serve(["--cloud", "--container-name", "vm-cli"], env);
    try {
      expect(first.url).toMatch(/^https:/);
      const certPath = join(state, "hangar", "tls", "cert.pem");
      const ca = readFileSync(certPath);
      const expected = execFileSync(
        "openssl",
        ["x509", "-in", certPath, "-noout", "-fingerprint", "-sha256"],
        {
          encoding: "utf8",
        },
      )
        .trim()
        .split("=")[1];
      const printed = await first.stdoutWith("fingerprint");
      expect(printed).toContain(`TLS certificate SHA-256 fingerprint: ${expected}`);
      expect((await postCommand(first.url, "version", {}, {}, ca)).status).toBe(401);
      const ok = await postCommand(
        first.url,
        "version",
        {},
        { "X-Container-Name": "vm-cli", "X-API-Key": "sk-cli-two" },
        ca,
      );
      expect(ok.event).toMatchObject({ success: true, protocol: 1 });
      expect(first.stderr()).not.toContain("sk-cli-");
      const shell = await postCommand(
        first.url,
        "run_command",
        { command: "env" },
        { "X-Container-Name": "vm-cli", "X-API-Key": "sk-cli-one" },
        ca,
      );
      expect(shell.event.success).toBe(true);
      expect(shell.event.stdout).not.toContain("sk-cli-");
    } finally {
      await first.stop();
    }
    const again = await serve(["--cloud"], { ...env, CONTAINER_NAME: "vm-cli" });
    try {
      const fingerprintLine = (out: string) => out.split("\n").find((line) => line.includes("fingerprint"));
      expect(fingerprintLine(await again.stdoutWith("fingerprint"))).toBe(
        fingerprintLine(await first.stdoutWith("fingerprint")),
      );
    } finally {
      await again.stop();
    }
  });

  it("serves TLS from --ssl-certfile/--ssl-keyfile and reads hashed keys from --api-key-file", async () => {
    const cert = makeTestCertificate();
    const keys = join(dir, "keys.txt");
    const digest = execFileSync("sh", ["-c", "printf %s sk-hashed-key | sha256sum"], {
      encoding: "utf8",
    }).split(" ")[0];
    writeFileSync(keys, `# hashed\nsha256:${digest}\n`);
    const server = await serve(
      [
        "--ssl-certfile",
        cert.certPath,
        "--ssl-keyfile",
        cert.keyPath,
        "--api-key-file",
        keys,
        "--container-name",
        "vm-f",
      ],
      {},
    );
    try {
      const headers = { "X-Container-Name": "vm-f", Authorization: "Bearer sk-hashed-key" };
      expect((await postCommand(server.url, "version", {}, headers, cert.cert)).status).toBe(200);
      expect((await send(`${server.url}/status`, { ca: cert.cert })).status).toBe(200);
    } finally {
      await server.stop();
      cert.remove();
    }
  });

  it("stays in local mode with CONTAINER_NAME alone", async () => {
    const server = await serve([], { CONTAINER_NAME: "vm-local", HANGAR_API_KEYS: "" });
    try {
      expect(server.url).toMatch(/^http:/);
      expect((await postCommand(server.url, "version", {})).status).toBe(200);
    } finally {
      await server.stop();
    }
  });

  it("refuses half a setup with a clear message", () => {
    const run = (args: string[], env: Record<string, string> = {}) => {
      try {
        execFileSync(
          process.execPath,
          ["bin/hangar.js", "serve", "--no-virtual-display", "--port", "0", ...args],
          {
            env: { ...process.env, HANGAR_API_KEYS: "", ...env },
            encoding: "utf8",
            stdio: "pipe",
          },
        );
        return "";
      } catch (err) {
        return String((err as { stderr: string }).stderr);
      }
    };
    expect(run(["--cloud"], { CONTAINER_NAME: "" })).toMatch(/^hangar: --cloud needs a container name/);
    expect(run(["--tls-cert", "x.pem"])).toMatch(/^hangar: TLS needs both --tls-cert and --tls-key/);
  });
});
