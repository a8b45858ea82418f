/**
 * Slows down guessing: each client address has a bucket of `burst` failed attempts that refills one
 * attempt every `refillMs`. An address whose bucket is empty is refused with 429 until it refills,
 * unless the credentials it sends are provably valid (valid clients are never slowed down).
 */
export interface FailureLimiterOptions {
  /** Failed attempts allowed in a row before the address is refused (default 10). */
  burst?: number;
  /** One more attempt becomes available after this many ms (default 6000: 10 per minute). */
  refillMs?: number;
  /** Addresses tracked at most; the stalest are forgotten first (default 10000). */
  maxAddresses?: number;
  now?: () => number;
}

interface Bucket {
  tokens: number;
  updated: number;
}

export class FailureLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly maxAddresses: number;
  private readonly now: () => number;

  constructor(options: FailureLimiterOptions = {}) {
    this.burst = options.burst ?? 10;
    this.refillMs = options.refillMs ?? 6000;
    this.maxAddresses = options.maxAddresses ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /** Seconds until the address may try again, or 0 when it is not refused. */
  retryAfterSeconds(address: string): number {
    const bucket = this.refill(address);
    if (!bucket || bucket.tokens >= 1) return 0;
    return Math.max(1, Math.ceil(((1 - bucket.tokens) * this.refillMs) / 1000));
  }

  /** Counts one failed attempt from the address. */
  recordFailure(address: string) {
    const bucket = this.refill(address) ?? { tokens: this.burst, updated: this.now() };
    bucket.tokens = Math.max(0, bucket.tokens - 1);
    this.buckets.delete(address);
    this.buckets.set(address, bucket);
    if (this.buckets.size > this.maxAddresses) {
      const stalest = this.buckets.keys().next().value;
      if (stalest !== undefined) this.buckets.delete(stalest);
    }
  }

  private refill(address: string): Bucket | undefined {
    const bucket = this.buckets.get(address);
    if (!bucket) return undefined;
    const now = this.now();
    bucket.tokens = Math.min(this.burst, bucket.tokens + (now - bucket.updated) / this.refillMs);
    bucket.updated = now;
    if (bucket.tokens >= this.burst) {
      this.buckets.delete(address);
      return undefined;
    }
    return bucket;
  }
}
