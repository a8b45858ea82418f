/**
 * Cloud mode's one decision: may these credentials use this server? Shared by the HTTP middleware
 * and the `/ws` handshake so both answer alike. The container name must equal the server's; the key
 * must match a configured key (held as digests) or satisfy the remote verifier. Failures are
 * counted per client address; an address with too many is refused (429) unless its credentials
 * are provably valid. Keys are never logged nor echoed.
 */

import { KeyDigests, parseKeyLines, sameText, sha256 } from "../../common/key-digests.js";
import { type Logger, silentLogger } from "../../common/logger.js";
import { FailureLimiter, type FailureLimiterOptions } from "./limiter.js";
import type { KeyVerifier } from "./verifier.js";

interface CommonOptions {
  /** The server's container name; `X-Container-Name` must equal it. */
  containerName: string;
  /** Failure limits per address; `false` turns them off. */
  limiter?: FailureLimiter | FailureLimiterOptions | false;
  log?: Logger;
}

/** Either configured keys (plain or `sha256:<hex>`) or a verifier function, as Hono's `bearerAuth`. */
export type CloudAuthOptions =
  | (CommonOptions & { keys: readonly string[] | KeyDigests; verify?: never })
  | (CommonOptions & { verify: KeyVerifier; keys?: never });

export interface Credentials {
  containerName?: string | null;
  apiKey?: string | null;
}

export const AUTH_MESSAGES = {
  nameRequired: "Container name required",
  keyRequired: "API key required",
  failed: "Authentication failed",
} as const;

export type AuthResult =
  | { ok: true }
  | { ok: false; status: 401 | 429; detail: string; retryAfterSeconds?: number };

export class Authenticator {
  readonly containerName: string;
  private readonly keys?: KeyDigests;
  private readonly verify?: KeyVerifier;
  /** Keys this server made for its own children (the pyautogui module), valid from loopback only. */
  private localKeys?: KeyDigests;
  private readonly limiter?: FailureLimiter;
  private readonly log: Logger;

  constructor(options: CloudAuthOptions) {
    if (!options.containerName) throw new Error("cloud auth needs a container name");
    this.containerName = options.containerName;
    if (options.verify) this.verify = options.verify;
    else if (options.keys instanceof KeyDigests) this.keys = options.keys;
    else this.keys = new KeyDigests(options.keys.flatMap((k, i) => parseKeyLines(k, `key ${i + 1}`)));
    const limiter = options.limiter ?? {};
    this.limiter =
      limiter === false
        ? undefined
        : limiter instanceof FailureLimiter
          ? limiter
          : new FailureLimiter(limiter);
    this.log = options.log ?? silentLogger;
  }

  /**
   * Checks credentials from a client at `address`. Missing credentials are reported in the order
   * the reference uses on that surface: HTTP asks for the name first, the `/ws` handshake the key.
   */
  async check(
    credentials: Credentials,
    address: string,
    order: "name-first" | "key-first" = "name-first",
  ): Promise<AuthResult> {
    const { containerName, apiKey } = credentials;
    const missing = [
      !containerName ? AUTH_MESSAGES.nameRequired : undefined,
      !apiKey ? AUTH_MESSAGES.keyRequired : undefined,
    ];
    if (order === "key-first") missing.reverse();
    const firstMissing = missing.find((m) => m !== undefined);
    if (firstMissing || !containerName || !apiKey)
      return this.refuse(address, firstMissing ?? AUTH_MESSAGES.failed);

    const retryAfterSeconds = this.limiter?.retryAfterSeconds(address) ?? 0;
    const valid =
      sameText(containerName, this.containerName) &&
      (await this.keyIsValid(apiKey, retryAfterSeconds > 0, address));
    if (valid) return { ok: true };
    if (retryAfterSeconds > 0) {
      this.log.warn(
        { address, retryAfterSeconds },
        "authentication refused: too many failures from this address",
      );
      return { ok: false, status: 429, detail: tooManyFailures(retryAfterSeconds), retryAfterSeconds };
    }
    return this.refuse(address, AUTH_MESSAGES.failed);
  }

  /**
   * Accepts `key` too, from loopback addresses only: a key the server hands to programs it starts
   * (through a private file, never their arguments or environment) so that they can call it back.
   */
  addLocalKey(key: string) {
    this.localKeys = new KeyDigests([sha256(key)]);
  }

  /** A refused address may still get in with valid keys; the remote verifier is then not called. */
  private async keyIsValid(apiKey: string, refused: boolean, address: string): Promise<boolean> {
    if (this.localKeys && isLoopbackAddress(address) && this.localKeys.matches(apiKey)) return true;
    if (this.keys) return this.keys.matches(apiKey);
    return this.verify ? this.verify(this.containerName, apiKey, { cachedOnly: refused }) : false;
  }

  private refuse(address: string, detail: string): AuthResult {
    const retryAfterSeconds = this.limiter?.retryAfterSeconds(address) ?? 0;
    if (retryAfterSeconds > 0) {
      return { ok: false, status: 429, detail: tooManyFailures(retryAfterSeconds), retryAfterSeconds };
    }
    this.limiter?.recordFailure(address);
    this.log.warn({ address, reason: detail }, "authentication failed");
    return { ok: false, status: 401, detail };
  }
}

function isLoopbackAddress(address: string): boolean {
  return address === "::1" || address.startsWith("127.") || address.startsWith("::ffff:127.");
}

function tooManyFailures(seconds: number): string {
  return `Too many failed authentication attempts from this address; retry in ${seconds} s`;
}
