/**
 * The keys E2B's SDKs present as `X-API-Key`: from a file only its owner can read (mode 0600 or
 * stricter; one key a line, or `sha256:<hex>` of a key, `#` comments) and from
 * `HANGAR_E2B_API_KEYS` (comma-separated). Held as digests and compared in constant time
 * (common/key-digests.ts); never logged. The control plane needs at least one: E2B's SDKs send a
 * key on every call and refuse to start without one.
 */
import { readFile, stat } from "node:fs/promises";
import { KeyDigests, parseKeyLines, parseKeyList } from "../../common/key-digests.js";

export const E2B_API_KEYS_ENV = "HANGAR_E2B_API_KEYS";

export async function loadE2bApiKeys(file: string | undefined, env: NodeJS.ProcessEnv): Promise<KeyDigests> {
  const digests = [];
  if (file) {
    const info = await stat(file).catch((err: Error) => {
      throw new Error(`--e2b-api-key-file: cannot read ${file}: ${err.message}`);
    });
    if ((info.mode & 0o077) !== 0) {
      const mode = (info.mode & 0o777).toString(8).padStart(4, "0");
      throw new Error(
        `--e2b-api-key-file: ${file} has mode ${mode}: others may read the keys in it; make it the owner's alone (chmod 600 ${file})`,
      );
    }
    const text = await readFile(file, "utf8");
    checkLengths(text.split(/\r?\n/), file);
    const fromFile = parseKeyLines(text, file);
    if (fromFile.length === 0) throw new Error(`--e2b-api-key-file: ${file} holds no key`);
    digests.push(...fromFile);
  }
  const listed = env[E2B_API_KEYS_ENV];
  if (listed) checkLengths(listed.split(","), E2B_API_KEYS_ENV);
  if (listed) digests.push(...parseKeyList(listed, E2B_API_KEYS_ENV));
  if (digests.length === 0) {
    throw new Error(
      `the E2B API (--e2b-port) needs API keys: give a file of keys with --e2b-api-key-file FILE (mode 0600) ` +
        `or set ${E2B_API_KEYS_ENV}=key1,key2; clients send one as E2B_API_KEY`,
    );
  }
  return new KeyDigests(digests);
}

/** A key is at least 16 characters (`openssl rand -hex 20` makes one); digests and comments pass. */
function checkLengths(entries: string[], source: string) {
  for (const entry of entries.map((e) => e.trim())) {
    if (entry === "" || entry.startsWith("#") || entry.startsWith("sha256:")) continue;
    if (entry.length < 16) {
      throw new Error(`${source}: a key of ${entry.length} characters is too easy to guess: use at least 16`);
    }
  }
}
