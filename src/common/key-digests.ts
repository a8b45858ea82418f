/**
 * API keys as a server holds them (the computer server's cloud keys, the host service's E2B
 * keys): only their SHA-256 digests, matched in constant time. A key list line is either a key or
 * `sha256:<64 hex digits>` (the digest of a key), so a key file need not hold the keys themselves.
 */
import { createHash, timingSafeEqual } from "node:crypto";

const HASHED = /^sha256:([0-9a-fA-F]{64})$/;

export function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

/** Parses key lines (blank lines and `#` comments skipped); throws naming the line of a bad entry. */
export function parseKeyLines(text: string, source: string): Buffer[] {
  const digests: Buffer[] = [];
  for (const [index, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const hashed = HASHED.exec(line);
    if (hashed) digests.push(Buffer.from(hashed[1], "hex"));
    else if (line.startsWith("sha256:"))
      throw new Error(`${source} line ${index + 1}: sha256: must be followed by 64 hex digits`);
    else if (/\s/.test(line)) throw new Error(`${source} line ${index + 1}: a key cannot contain spaces`);
    else digests.push(sha256(line));
  }
  return digests;
}

/** Keys from a comma-separated list (an environment variable), same syntax as a key file's lines. */
export function parseKeyList(text: string, source: string): Buffer[] {
  return parseKeyLines(text.split(",").join("\n"), source);
}

/** A set of key digests. `matches` compares against every entry, without stopping at the first hit. */
export class KeyDigests {
  private readonly digests: readonly Buffer[];

  constructor(digests: readonly Buffer[]) {
    if (digests.length === 0) throw new Error("at least one API key is needed");
    this.digests = digests.map((d) => Buffer.from(d));
  }

  get size(): number {
    return this.digests.length;
  }

  matches(key: string): boolean {
    const presented = sha256(key);
    let found = false;
    for (const digest of this.digests) found = timingSafeEqual(presented, digest) || found;
    return found;
  }
}

/** Compares two strings in time that depends on neither's content. */
export function sameText(a: string, b: string): boolean {
  return timingSafeEqual(sha256(a), sha256(b));
}
