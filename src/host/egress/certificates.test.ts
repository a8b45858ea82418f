/**
 * The egress CA and a domain's certificate (certificates.ts): signed as a desktop's trust stores
 * expect, and valid from two days back, so that a desktop whose clock is behind the host's (a guest
 * just booted under emulation, a fork before its clock is set) takes them at once.
 */
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ensureCa, ensureLeaf } from "./certificates.js";

const dir = mkdtempSync(join(tmpdir(), "hangar-certificates-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("egress certificates", () => {
  it("a CA and a domain's certificate, valid from two days back, the keys 0600 and nothing else left", async () => {
    const before = Date.now();
    const ca = await ensureCa(join(dir, "ca"), "Hangar egress CA (box)");
    const leaf = await ensureLeaf(ca, join(dir, "leaves"), "api.example.test");
    const caCert = new X509Certificate(readFileSync(ca.cert));
    const leafCert = new X509Certificate(readFileSync(leaf.cert));
    expect(caCert.ca).toBe(true);
    expect(caCert.subject).toBe("CN=Hangar egress CA (box)");
    expect(leafCert.issuer).toBe(caCert.subject);
    expect(leafCert.subjectAltName).toBe("DNS:api.example.test");
    expect(leafCert.checkIssued(caCert)).toBe(true);
    expect(leafCert.verify(caCert.publicKey)).toBe(true);
    for (const cert of [caCert, leafCert]) {
      const from = Date.parse(cert.validFrom);
      expect(before - from).toBeGreaterThan(47 * 3600_000);
      expect(before - from).toBeLessThan(49 * 3600_000);
    }
    expect(Date.parse(leafCert.validTo) - before).toBeGreaterThan(364 * 86_400_000);
    for (const key of [ca.key, leaf.key]) expect(statSync(key).mode & 0o777).toBe(0o600);
    // No request, extension file or temporary certificate beside them.
    expect(readdirSync(join(dir, "ca")).sort()).toEqual(["ca.crt", "ca.key"]);
    expect(readdirSync(join(dir, "leaves")).sort()).toEqual(["api.example.test.crt", "api.example.test.key"]);
  });
});
