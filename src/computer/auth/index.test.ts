import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { resolveCloudAuth } from "./config.js";
import { Authenticator, FailureLimiter, KeyDigests, parseKeyLines } from "./index.js";

const digestOf = (key: string) => createHash("sha256").update(key).digest("hex");
const dir = mkdtempSync(join(tmpdir(), "hangar-keys-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("API keys", () => {
  it("match plain keys and sha256 digests from a key file, and nothing else", () => {
    const keys = new KeyDigests(
      parseKeyLines(`# comment\n\nplain-key-1\n  sha256:${digestOf("hashed-key-2")}  \r\n`, "keys.txt"),
    );
    expect(keys.size).toBe(2);
    expect(keys.matches("plain-key-1")).toBe(true);
    expect(keys.matches("hashed-key-2")).toBe(true);
    expect(keys.matches(`sha256:${digestOf("hashed-key-2")}`)).toBe(false);
    expect(keys.matches("plain-key-")).toBe(false);
    expect(keys.matches("")).toBe(false);
  });

  it("names the line of a malformed entry without echoing it", () => {
    expect(() => parseKeyLines("good\nsha256:abc", "keys.txt")).toThrow(
      "keys.txt line 2: sha256: must be followed by 64 hex digits",
    );
    expect(() => parseKeyLines("two words", "keys.txt")).toThrow(
      /^keys.txt line 1: a key cannot contain spaces$/,
    );
  });
});

describe("cloud mode selection", () => {
  it("stays local with a container name alone, as cua images set CONTAINER_NAME everywhere", async () => {
    expect(await resolveCloudAuth({ env: { CONTAINER_NAME: "vm-1" } })).toBeUndefined();
    expect(await resolveCloudAuth({ containerName: "vm-1", env: {} })).toBeUndefined();
  });

  it("turns on with a name and keys from a file or the environment", async () => {
    const file = join(dir, "keys.txt");
    writeFileSync(file, "file-key\n");
    const fromFile = await resolveCloudAuth({ apiKeyFile: file, env: { CONTAINER_NAME: "vm-1" } });
    expect(fromFile?.containerName).toBe("vm-1");
    const auth = new Authenticator({ ...fromFile!, limiter: false });
    expect(await auth.check({ containerName: "vm-1", apiKey: "file-key" }, "a")).toEqual({ ok: true });
    const fromEnv = await resolveCloudAuth({ containerName: "vm-2", env: { HANGAR_API_KEYS: "k1, k2" } });
    const auth2 = new Authenticator({ ...fromEnv!, limiter: false });
    expect(await auth2.check({ containerName: "vm-2", apiKey: "k2" }, "a")).toEqual({ ok: true });
    expect((await auth2.check({ containerName: "vm-1", apiKey: "k2" }, "a")).ok).toBe(false);
  });

  it("refuses half a setup with a message saying what is missing", async () => {
    await expect(resolveCloudAuth({ env: { HANGAR_API_KEYS: "k1" } })).rejects.toThrow(/no container name/);
    await expect(
      resolveCloudAuth({
        env: { CONTAINER_NAME: "vm", HANGAR_API_KEYS: "k", HANGAR_AUTH_URL: "https://a.example" },
      }),
    ).rejects.toThrow(/either API keys .* or --auth-url/);
    await expect(resolveCloudAuth({ apiKeyFile: join(dir, "missing"), env: {} })).rejects.toThrow(
      /cannot read/,
    );
    await expect(
      resolveCloudAuth({ containerName: "vm", authUrl: "http://auth.example.com", env: {} }),
    ).rejects.toThrow(/must be https/);
  });
});

describe("the failure limiter", () => {
  it("refuses an address after a burst of failures and lets it in again as the bucket refills", () => {
    let now = 0;
    const limiter = new FailureLimiter({ burst: 3, refillMs: 1000, now: () => now });
    for (let i = 0; i < 3; i++) {
      expect(limiter.retryAfterSeconds("a")).toBe(0);
      limiter.recordFailure("a");
    }
    expect(limiter.retryAfterSeconds("a")).toBe(1);
    expect(limiter.retryAfterSeconds("b")).toBe(0);
    now = 1000;
    expect(limiter.retryAfterSeconds("a")).toBe(0);
  });

  it("forgets the stalest addresses beyond its bound", () => {
    const limiter = new FailureLimiter({ burst: 1, refillMs: 60_000, maxAddresses: 2 });
    for (const address of ["a", "b", "c"]) limiter.recordFailure(address);
    expect(limiter.retryAfterSeconds("a")).toBe(0);
    expect(limiter.retryAfterSeconds("c")).toBeGreaterThan(0);
  });

  it("lets valid credentials through from a refused address; the rest get 429", async () => {
    const auth = new Authenticator({
      containerName: "vm",
      keys: ["right"],
      limiter: { burst: 2, refillMs: 60_000 },
    });
    expect(await auth.check({ containerName: "vm", apiKey: "bad" }, "ip")).toMatchObject({ status: 401 });
    expect(await auth.check({ containerName: "vm" }, "ip")).toMatchObject({
      status: 401,
      detail: "API key required",
    });
    expect(await auth.check({ containerName: "vm", apiKey: "bad" }, "ip")).toMatchObject({
      status: 429,
      retryAfterSeconds: 60,
    });
    expect(await auth.check({ containerName: "vm", apiKey: "right" }, "ip")).toEqual({ ok: true });
    expect(await auth.check({ containerName: "vm", apiKey: "bad" }, "other")).toMatchObject({ status: 401 });
  });
});
