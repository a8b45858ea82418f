import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { containerSettings } from "./settings.js";

const secrets = mkdtempSync(join(tmpdir(), "hangar-secrets-"));
const empty = mkdtempSync(join(tmpdir(), "hangar-no-secrets-"));
mkdirSync(join(secrets, "tls"));
mkdirSync(join(secrets, "api-keys"));
writeFileSync(join(secrets, "tls", "tls.crt"), "cert");
writeFileSync(join(secrets, "tls", "tls.key"), "key");
writeFileSync(join(secrets, "api-keys", "keys"), "k1\n");
afterAll(() => {
  rmSync(secrets, { recursive: true, force: true });
  rmSync(empty, { recursive: true, force: true });
});

describe("containerSettings", () => {
  it("turns keys in the environment into cloud mode on 8443 with a self-signed certificate for the name", () => {
    const s = containerSettings(
      { HANGAR_SECRETS_DIR: empty, CONTAINER_NAME: "box", HANGAR_API_KEYS: "k" },
      [],
    );
    expect(s.serveArgs).toEqual(["serve", "--host", "0.0.0.0", "--port", "8443", "--cloud", "--warm-up"]);
    expect(s.selfSignedFor).toBe("box");
    expect(s.healthOrigin).toBe("https://127.0.0.1:8443");
    const insecure = containerSettings({ HANGAR_SECRETS_DIR: empty, HANGAR_API_KEYS: "k" }, [
      "--insecure-http",
    ]);
    expect(insecure.serveArgs).toEqual([
      "serve",
      "--host",
      "0.0.0.0",
      "--port",
      "8000",
      "--insecure-http",
      "--warm-up",
    ]);
    expect(insecure.insecureHttp).toBe(true);
  });

  it("takes a key file mounted at api-keys, and says how to make an unreadable one readable", () => {
    const dir = mkdtempSync(join(tmpdir(), "hangar-secrets-"));
    writeFileSync(join(dir, "api-keys"), "k1\n", { mode: 0o600 });
    const s = containerSettings({ HANGAR_SECRETS_DIR: dir }, []);
    expect(s.serveArgs).toContain(join(dir, "api-keys"));
    expect(s.serveArgs).toContain("--cloud");
    if (process.getuid?.() !== 0) {
      chmodSync(join(dir, "api-keys"), 0);
      expect(() => containerSettings({ HANGAR_SECRETS_DIR: dir }, [])).toThrow(/--group-add/);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it("leaves the display to another program with HANGAR_EXTERNAL_DISPLAY, and VNC too", () => {
    const s = containerSettings(
      { HANGAR_SECRETS_DIR: empty, HANGAR_EXTERNAL_DISPLAY: ":0", HANGAR_VNC: "1" },
      [],
    );
    expect(s.externalDisplay).toBe(":0");
    expect(s.vnc).toBeUndefined();
    // That display comes and goes with its program: nothing to warm up at the server's start.
    expect(s.serveArgs).not.toContain("--warm-up");
    expect(() =>
      containerSettings({ HANGAR_SECRETS_DIR: empty, HANGAR_EXTERNAL_DISPLAY: "remote:0" }, []),
    ).toThrow(/HANGAR_EXTERNAL_DISPLAY must be a local display such as :0/);
  });

  it("serves plain HTTP on 8000 on every interface by default", () => {
    const s = containerSettings({ HANGAR_SECRETS_DIR: empty }, []);
    expect(s.serveArgs).toEqual(["serve", "--host", "0.0.0.0", "--port", "8000", "--warm-up"]);
    expect(s.healthOrigin).toBe("http://127.0.0.1:8000");
    expect(s.privateFiles).toEqual([]);
    expect([s.width, s.height]).toEqual([1280, 800]);
    expect(s.vnc).toBeUndefined();
  });

  it("passes mounted TLS and key files as flags and moves to 8443 over HTTPS", () => {
    const s = containerSettings({ HANGAR_SECRETS_DIR: secrets }, ["--log-level", "warn"]);
    expect(s.serveArgs).toEqual([
      "serve",
      "--host",
      "0.0.0.0",
      "--port",
      "8443",
      "--log-level",
      "warn",
      "--tls-cert",
      join(secrets, "tls", "tls.crt"),
      "--tls-key",
      join(secrets, "tls", "tls.key"),
      "--api-key-file",
      join(secrets, "api-keys", "keys"),
      "--cloud",
      "--warm-up",
    ]);
    expect(s.healthOrigin).toBe("https://127.0.0.1:8443");
  });

  it("keeps flags given as arguments instead of the mounted files", () => {
    const s = containerSettings({ HANGAR_SECRETS_DIR: secrets }, [
      "--tls-cert=/c.pem",
      "--tls-key=/k.pem",
      "--api-key-file",
      "/keys",
      "--port=9443",
    ]);
    expect(s.serveArgs).toEqual([
      "serve",
      "--host",
      "0.0.0.0",
      "--tls-cert=/c.pem",
      "--tls-key=/k.pem",
      "--api-key-file",
      "/keys",
      "--port=9443",
      "--cloud",
      "--warm-up",
    ]);
    expect(s.healthOrigin).toBe("https://127.0.0.1:9443");
  });

  it("writes a certificate and key given as PEM text in the environment to private files", () => {
    const s = containerSettings(
      {
        HANGAR_SECRETS_DIR: secrets,
        TMPDIR: "/scratch",
        HANGAR_TLS_CERT: "CERT PEM",
        HANGAR_TLS_KEY: "KEY PEM",
      },
      [],
    );
    expect(s.privateFiles).toEqual([
      { path: "/scratch/hangar/tls/cert.pem", content: "CERT PEM" },
      { path: "/scratch/hangar/tls/key.pem", content: "KEY PEM" },
    ]);
    expect(s.serveArgs).toEqual([
      "serve",
      "--host",
      "0.0.0.0",
      "--port",
      "8443",
      "--tls-cert",
      "/scratch/hangar/tls/cert.pem",
      "--tls-key",
      "/scratch/hangar/tls/key.pem",
      "--api-key-file",
      join(secrets, "api-keys", "keys"),
      "--cloud",
      "--warm-up",
    ]);
    expect(() => containerSettings({ HANGAR_TLS_CERT: "CERT PEM" }, [])).toThrow(
      /HANGAR_TLS_CERT and HANGAR_TLS_KEY go together/,
    );
    const given = containerSettings({ HANGAR_TLS_CERT: "C", HANGAR_TLS_KEY: "K" }, [
      "--tls-cert",
      "/c",
      "--tls-key",
      "/k",
    ]);
    expect(given.privateFiles).toEqual([]);
  });

  it("uses HTTPS on 8443 for --cloud (a self-signed certificate)", () => {
    expect(containerSettings({ HANGAR_SECRETS_DIR: empty }, ["--cloud"]).healthOrigin).toBe(
      "https://127.0.0.1:8443",
    );
  });

  it("reads the screen size, the listen address and the VNC settings", () => {
    const s = containerSettings(
      {
        HANGAR_SECRETS_DIR: empty,
        HANGAR_DISPLAY: "1920x1080",
        HANGAR_HOST: "127.0.0.1",
        HANGAR_VNC: "1",
        HANGAR_VNC_PASSWORD: "pw",
        HANGAR_NOVNC_PORT: "7000",
      },
      [],
    );
    expect([s.width, s.height]).toEqual([1920, 1080]);
    expect(s.serveArgs.slice(1, 3)).toEqual(["--host", "127.0.0.1"]);
    expect(s.vnc).toEqual({ port: 5900, webPort: 7000, password: "pw" });
  });

  it("refuses VNC without a password, and names what is wrong in bad settings", () => {
    expect(() => containerSettings({ HANGAR_SECRETS_DIR: empty, HANGAR_VNC: "1" }, [])).toThrow(
      /HANGAR_VNC=1 needs a password/,
    );
    expect(() =>
      containerSettings({ HANGAR_VNC: "1", HANGAR_VNC_PASSWORD_FILE: join(empty, "missing") }, []),
    ).toThrow(/HANGAR_VNC_PASSWORD_FILE/);
    expect(() => containerSettings({ HANGAR_DISPLAY: "big" }, [])).toThrow(
      /HANGAR_DISPLAY must be WIDTHxHEIGHT/,
    );
    expect(() =>
      containerSettings({ HANGAR_VNC: "1", HANGAR_VNC_PASSWORD: "x", HANGAR_VNC_PORT: "99999" }, []),
    ).toThrow(/HANGAR_VNC_PORT must be a port number/);
    expect(() => containerSettings({}, ["--port", "http"])).toThrow(/--port must be a port number/);
  });
});

describe("OSWorld's controller", () => {
  it("is served on HANGAR_OSWORLD's port (the image sets 5000) unless off or given as a flag", () => {
    const on = containerSettings({ HANGAR_OSWORLD: "5000" }, []);
    expect(on.serveArgs).toEqual([
      "serve",
      "--host",
      "0.0.0.0",
      "--port",
      "8000",
      "--warm-up",
      "--osworld",
      "5000",
    ]);
    expect(containerSettings({ HANGAR_OSWORLD: "off" }, []).serveArgs).not.toContain("--osworld");
    expect(containerSettings({}, []).serveArgs).not.toContain("--osworld");
    const flag = containerSettings({ HANGAR_OSWORLD: "5000" }, ["--osworld", "6000"]);
    expect(flag.serveArgs.filter((a) => a === "--osworld")).toHaveLength(1);
    expect(() => containerSettings({ HANGAR_OSWORLD: "yes" }, [])).toThrow(/HANGAR_OSWORLD must be a port/);
  });
});

describe("E2B's envd", () => {
  it("is served on HANGAR_ENVD's port with the mounted token file, and not without HANGAR_ENVD", () => {
    const dir = mkdtempSync(join(tmpdir(), "hangar-secrets-"));
    try {
      writeFileSync(join(dir, "envd-token"), "token\n", { mode: 0o600 });
      const on = containerSettings({ HANGAR_ENVD: "49983", HANGAR_SECRETS_DIR: dir }, []);
      expect(on.serveArgs.slice(-4)).toEqual([
        "--envd-port",
        "49983",
        "--envd-token-file",
        join(dir, "envd-token"),
      ]);
      expect(containerSettings({ HANGAR_SECRETS_DIR: dir }, []).serveArgs).not.toContain("--envd-port");
      expect(containerSettings({ HANGAR_ENVD: "off", HANGAR_SECRETS_DIR: dir }, []).serveArgs).not.toContain(
        "--envd-token-file",
      );
      const flag = containerSettings({ HANGAR_SECRETS_DIR: dir }, ["--envd-port", "5999"]);
      expect(flag.serveArgs).toContain("--envd-token-file");
      expect(() => containerSettings({ HANGAR_ENVD: "on" }, [])).toThrow(/HANGAR_ENVD must be a port/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("keeps envd on the container's loopback without a token file (the host service reaches it through the tunnel)", () => {
    const s = containerSettings({ HANGAR_ENVD: "49983", HANGAR_SECRETS_DIR: empty }, []);
    expect(s.serveArgs.slice(-4)).toEqual(["--envd-port", "49983", "--envd-host", "127.0.0.1"]);
    const asked = containerSettings({ HANGAR_ENVD: "49983", HANGAR_SECRETS_DIR: empty }, [
      "--envd-host",
      "0.0.0.0",
    ]);
    expect(asked.serveArgs.filter((a) => a === "--envd-host")).toHaveLength(1);
  });
});
