/**
 * Bearer tokens: the registry (real, with token auth) sends clients to a token service; this test
 * runs that service on loopback, issuing JWTs signed with a throw-away certificate the registry
 * trusts. Pulls and pushes fetch a token with the right scope; anonymous pulls get a pull-only
 * token (so pushes are denied); wrong credentials are refused by the token service.
 */

import { createSign, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { pullImage, pushVm } from "../../src/host/images/oci/index.js";
import { startRegistry, type TestRegistry } from "../support/registry.js";
import { makeTestCertificate, type TestCertificate } from "../support/tls.js";
import { makeVmDir } from "../support/vm-dir.js";

const MiB = 1024 * 1024;
const user = { username: "robot", password: randomBytes(8).toString("hex") };
let registry: TestRegistry;
let tokens: Server;
let work: string;
let signing: TestCertificate;
const scopes: string[] = [];

const b64url = (data: Buffer | string) => Buffer.from(data).toString("base64url");

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "hangar-oci-token-"));
  signing = makeTestCertificate();
  const key = signing.key.toString("utf8");
  const certDer = Buffer.from(signing.cert.toString("utf8").replace(/-----[^-]+-----|\s/g, ""), "base64");

  tokens = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://token");
    const scope = url.searchParams.get("scope") ?? "";
    scopes.push(scope);
    const auth = req.headers.authorization;
    const signedIn = auth === `Basic ${Buffer.from(`${user.username}:${user.password}`).toString("base64")}`;
    if (auth && !signedIn) {
      res.writeHead(401, { "content-type": "application/json" }).end('{"details":"bad credentials"}');
      return;
    }
    const [, name, actions] = /^repository:([^:]+):(.+)$/.exec(scope) ?? [];
    const granted = (actions ?? "").split(",").filter((a) => a === "pull" || (a === "push" && signedIn));
    const now = Math.floor(Date.now() / 1000);
    const header = b64url(JSON.stringify({ typ: "JWT", alg: "RS256", x5c: [certDer.toString("base64")] }));
    const claims = b64url(
      JSON.stringify({
        iss: "hangar-test-issuer",
        sub: signedIn ? user.username : "",
        aud: "hangar-test-registry",
        exp: now + 300,
        nbf: now - 10,
        iat: now,
        jti: randomBytes(8).toString("hex"),
        access: name ? [{ type: "repository", name, actions: granted }] : [],
      }),
    );
    const signature = createSign("RSA-SHA256").update(`${header}.${claims}`).sign(key);
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ token: `${header}.${claims}.${b64url(signature)}`, expires_in: 300 }));
  });
  await new Promise<void>((resolve) => tokens.listen(0, "127.0.0.1", resolve));
  const realm = `http://127.0.0.1:${(tokens.address() as AddressInfo).port}/token`;
  registry = await startRegistry({
    token: {
      realm,
      service: "hangar-test-registry",
      issuer: "hangar-test-issuer",
      rootCertBundle: signing.certPath,
    },
  });
  await makeVmDir(join(work, "src"), { diskSize: 2 * MiB, writes: [{ offset: 0, data: randomBytes(MiB) }] });
});

afterAll(async () => {
  await registry?.stop();
  await new Promise((resolve) => tokens?.close(resolve));
  if (work) await rm(work, { recursive: true, force: true });
  signing?.remove();
});

const push = (credentials: { username: string; password: string } | null) =>
  pushVm({
    vmDir: join(work, "src"),
    imageName: "app",
    tags: ["latest"],
    registry: registry.host,
    organization: "team",
    credentials,
    retry: { attempts: 1 },
  });

const pull = (dest: string, credentials: { username: string; password: string } | null) =>
  pullImage({
    image: "app:latest",
    registry: registry.host,
    organization: "team",
    destDir: join(work, dest),
    cacheDirectory: join(work, "cache"),
    credentials,
    retry: { attempts: 1 },
  });

it("pushes and pulls with tokens from the token service the registry names", async () => {
  await push(user);
  expect(scopes).toContain("repository:team/app:pull,push");
  await pull("signed-in", user);
  await pull("anonymous", null); // the token service grants anonymous pulls
  expect(scopes.at(-1)).toBe("repository:team/app:pull");
  const disk = await readFile(join(work, "anonymous", "disk.img"));
  expect(disk.equals(await readFile(join(work, "src", "disk.img")))).toBe(true);
});

it("says so when the token service refuses the credentials or the token lacks push", async () => {
  await expect(pull("bad", { ...user, password: "wrong" })).rejects.toThrow(
    `${registry.host} rejected the credentials of robot for team/app`,
  );
  await expect(push(null)).rejects.toThrow(
    /requires credentials for team\/app: set HANGAR_REGISTRY_USERNAME/,
  );
});
