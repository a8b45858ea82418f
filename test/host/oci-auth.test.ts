/**
 * A registry with htpasswd Basic auth: credentials from the environment are used when the
 * registry challenges; wrong or missing ones give a clear error and leave no VM.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseChallenge } from "../../src/host/images/oci/auth.js";
import { credentialsFromEnv, pullImage, pushVm } from "../../src/host/images/oci/index.js";
import { startRegistry, type TestRegistry } from "../support/registry.js";
import { makeVmDir } from "../support/vm-dir.js";

const MiB = 1024 * 1024;
const auth = { username: "builder", password: randomBytes(9).toString("hex") };
let registry: TestRegistry;
let work: string;

beforeAll(async () => {
  registry = await startRegistry({ auth });
  work = await mkdtemp(join(tmpdir(), "hangar-oci-auth-"));
  await makeVmDir(join(work, "src"), {
    diskSize: 4 * MiB,
    writes: [{ offset: MiB, data: randomBytes(MiB) }],
  });
});

afterAll(async () => {
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

const options = (credentials?: { username: string; password: string } | null) => ({
  registry: registry.host,
  organization: "team",
  credentials,
});

describe("registry authentication", () => {
  it("reads credentials from HANGAR_REGISTRY_* first, then lume's GITHUB_*", () => {
    expect(credentialsFromEnv({})).toBeUndefined();
    expect(credentialsFromEnv({ GITHUB_USERNAME: "gh", GITHUB_TOKEN: "t" })).toEqual({
      username: "gh",
      password: "t",
    });
    expect(
      credentialsFromEnv({
        GITHUB_USERNAME: "gh",
        GITHUB_TOKEN: "t",
        HANGAR_REGISTRY_USERNAME: "me",
        HANGAR_REGISTRY_PASSWORD: "p",
      }),
    ).toEqual({ username: "me", password: "p" });
    expect(
      parseChallenge('Bearer realm="https://auth.example/token",service="reg",scope="repository:a/b:pull"'),
    ).toEqual({
      scheme: "bearer",
      params: { realm: "https://auth.example/token", service: "reg", scope: "repository:a/b:pull" },
    });
  });

  it("pushes and pulls with the right credentials", async () => {
    const pushed = await pushVm({
      vmDir: join(work, "src"),
      imageName: "private",
      tags: ["latest"],
      chunkSizeMb: 1,
      ...options(auth),
    });
    expect(pushed.uploadedBlobs).toBeGreaterThan(2);
    await pullImage({
      image: "private:latest",
      destDir: join(work, "ok"),
      cacheDirectory: join(work, "cache"),
      ...options(auth),
    });
    const pulled = await readFile(join(work, "ok", "disk.img"));
    expect(pulled.equals(await readFile(join(work, "src", "disk.img")))).toBe(true);
  });

  it("says so when the credentials are wrong or missing, and leaves no VM", async () => {
    const pull = (dest: string, credentials: { username: string; password: string } | null) =>
      pullImage({
        image: "private:latest",
        destDir: join(work, dest),
        cacheDirectory: join(work, "cache"),
        ...options(credentials),
        retry: { attempts: 1 },
      });
    await expect(pull("wrong", { username: auth.username, password: "not-it" })).rejects.toThrow(
      `${registry.host} rejected the credentials of builder for team/private`,
    );
    await expect(stat(join(work, "wrong"))).rejects.toThrow();
    await expect(pull("anonymous", null)).rejects.toThrow(
      /requires credentials for team\/private: set HANGAR_REGISTRY_USERNAME/,
    );
    await expect(
      pushVm({
        vmDir: join(work, "src"),
        imageName: "private",
        tags: ["x"],
        ...options({ ...auth, password: "no" }),
      }),
    ).rejects.toThrow(/rejected the credentials/);
  });
});
