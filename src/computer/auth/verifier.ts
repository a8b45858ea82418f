/**
 * The reference's remote key check: `GET {base}/api/vm/auth?container_name=<name>` with
 * `Authorization: Bearer <key>`; valid when the answer is 200 with a non-empty body. A success is
 * remembered briefly (keyed by a digest, never the key); a refusal, an error or an unreachable
 * verifier is never remembered, so a verifier that was down at boot does not lock clients out.
 */
import { sha256 } from "../../common/key-digests.js";

export interface RemoteVerifierOptions {
  /** Base URL, e.g. `https://auth.example.com`; plain http only for a loopback host. */
  baseUrl: string;
  /** How long a success is remembered (default 30 s; 0 turns the cache off). */
  cacheMs?: number;
  /** Give up on the verifier after this long (default 5 s). */
  timeoutMs?: number;
  /** Entries remembered at most (default 1000). */
  maxEntries?: number;
}

/** Answers whether a key is valid for a container; `cachedOnly` never calls out. */
export type KeyVerifier = (
  containerName: string,
  apiKey: string,
  options?: { cachedOnly?: boolean },
) => Promise<boolean>;

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

/** Checks the verifier's base URL; throws a message naming what is wrong. */
export function parseVerifierUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`--auth-url: not a URL: ${text}`);
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && LOOPBACK.has(url.hostname))) {
    throw new Error("--auth-url: must be https (plain http is allowed only for a loopback host)");
  }
  if (url.username || url.password) throw new Error("--auth-url: must not contain credentials");
  return url;
}

export function remoteVerifier(options: RemoteVerifierOptions): KeyVerifier {
  const base = parseVerifierUrl(options.baseUrl).href.replace(/\/+$/, "");
  const cacheMs = options.cacheMs ?? 30_000;
  const timeoutMs = options.timeoutMs ?? 5000;
  const maxEntries = options.maxEntries ?? 1000;
  const validUntil = new Map<string, number>();
  const inFlight = new Map<string, Promise<boolean>>();

  const ask = async (containerName: string, apiKey: string): Promise<boolean> => {
    try {
      const url = `${base}/api/vm/auth?container_name=${encodeURIComponent(containerName)}`;
      const res = await fetch(url, {
        headers: { authorization: `Bearer ${apiKey}` },
        signal: AbortSignal.timeout(timeoutMs),
        redirect: "error",
      });
      const body = await res.text();
      return res.status === 200 && body.trim() !== "";
    } catch {
      return false;
    }
  };

  return async (containerName, apiKey, { cachedOnly = false } = {}) => {
    const id = sha256(`${containerName}\0${apiKey}`).toString("hex");
    const until = validUntil.get(id);
    if (until !== undefined) {
      if (until > Date.now()) return true;
      validUntil.delete(id);
    }
    if (cachedOnly) return false;
    let pending = inFlight.get(id);
    if (!pending) {
      pending = ask(containerName, apiKey).finally(() => inFlight.delete(id));
      inFlight.set(id, pending);
    }
    const valid = await pending;
    if (valid && cacheMs > 0) {
      validUntil.set(id, Date.now() + cacheMs);
      if (validUntil.size > maxEntries) validUntil.delete(validUntil.keys().next().value as string);
    }
    return valid;
  };
}
