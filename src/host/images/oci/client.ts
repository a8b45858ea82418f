/**
 * A client for one repository of an OCI distribution registry: manifests, blob downloads, blob
 * existence checks and uploads (monolithic for small blobs, chunked PATCHes for large ones).
 * Authentication follows the registry's challenge (see auth.ts); network errors, 5xx and 429 are
 * retried with backoff.
 */
import { createHash } from "node:crypto";
import type { Readable } from "node:stream";
import { HostError } from "../../errors.js";
import { basicHeader, type Credentials, credentialsFromEnv, parseChallenge } from "./auth.js";
import { type Manifest, MEDIA_TYPE, manifestSchema } from "./format.js";
import { registryBaseUrl } from "./reference.js";
import { cancelled, type RetryOptions, TransientError, withRetry } from "./retry.js";

export interface RegistryClientOptions {
  /** `host[:port]`, or a URL with its scheme (`http://127.0.0.1:5000`). */
  registry: string;
  /** `<organization>/<image name>`. */
  repository: string;
  /** None: anonymous. */
  credentials?: Credentials;
  /** Ask the token service for push rights too. */
  push?: boolean;
  retry?: RetryOptions;
  signal?: AbortSignal;
  /** Blobs up to this size go up in one PUT (default 16 MiB); larger ones in PATCHes. */
  monolithicLimitBytes?: number;
  /** The size of each PATCH of a chunked upload (default 64 MiB). */
  uploadChunkBytes?: number;
}

export interface FetchedManifest {
  manifest: Manifest;
  digest: string;
  raw: Buffer;
}

export interface BlobSource {
  digest: string;
  size: number;
  /** A fresh stream of bytes [start, end) of the blob; called again on each retry. */
  open(start: number, end: number): Readable;
  /** Bytes sent, as they go (reset to the start of a piece on a retry). */
  onBytes?: (bytes: number) => void;
}

interface RequestInit2 {
  headers?: Record<string, string>;
  body?: () => Readable | Buffer | undefined;
  /** Retry transient failures of this request on its own (default true). */
  retry?: boolean;
}

const ERROR_BODY_LIMIT = 2048;
/** The largest manifest accepted (the registry's own limit is 4 MiB). */
const MANIFEST_LIMIT = 4 * 1024 * 1024;

/** What a pull or a push says about its registry connection. */
export interface TransferClientOptions extends Omit<RegistryClientOptions, "credentials"> {
  /** None: those of the environment (credentialsFromEnv); null: anonymous. */
  credentials?: Credentials | null;
}

/**
 * The client of one pull or push, and the controller whose abort stops the transfer's other parts
 * when one fails (the caller's own signal stops them too).
 */
export function transferClient(options: TransferClientOptions): {
  client: RegistryClient;
  stop: AbortController;
  signal: AbortSignal;
} {
  const credentials =
    options.credentials === null ? undefined : (options.credentials ?? credentialsFromEnv());
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;
  return { client: new RegistryClient({ ...options, credentials, signal }), stop, signal };
}

export class RegistryClient {
  readonly baseUrl: string;
  readonly repository: string;
  private authorization?: string;
  private readonly host: string;

  constructor(private readonly options: RegistryClientOptions) {
    this.baseUrl = registryBaseUrl(options.registry);
    this.host = new URL(this.baseUrl).host;
    this.repository = options.repository;
  }

  /** Fetches and validates a manifest; its digest is checked against the bytes received. */
  async getManifest(reference: string): Promise<FetchedManifest> {
    const res = await this.request("GET", `/v2/${this.repository}/manifests/${reference}`, {
      headers: { accept: MEDIA_TYPE.manifest },
    });
    if (res.status === 404) {
      await drain(res);
      throw new HostError("not_found", `Image ${this.repository}:${reference} was not found on ${this.host}`);
    }
    await this.expect(res, [200], `fetch the manifest of ${this.repository}:${reference}`);
    const raw = await readCapped(res, MANIFEST_LIMIT, `the manifest of ${this.repository}:${reference}`);
    const computed = `sha256:${createHash("sha256").update(raw).digest("hex")}`;
    const announced = res.headers.get("docker-content-digest");
    if (announced && announced !== computed) {
      throw new HostError(
        "failed",
        `The manifest of ${this.repository}:${reference} does not match its digest (${announced} announced, ${computed} received)`,
      );
    }
    let json: unknown;
    try {
      json = JSON.parse(raw.toString("utf8"));
    } catch {
      throw new HostError("failed", `The manifest of ${this.repository}:${reference} is not JSON`);
    }
    const parsed = manifestSchema.safeParse(json);
    if (!parsed.success) {
      const kind = (json as { mediaType?: string })?.mediaType;
      throw new HostError(
        "failed",
        `${this.repository}:${reference} is not a lume VM image${kind ? ` (manifest type ${kind})` : ""}: ${parsed.error.issues[0]?.path.join(".")} ${parsed.error.issues[0]?.message}`,
      );
    }
    return { manifest: parsed.data, digest: computed, raw };
  }

  /** Starts a blob download; the caller reads (and verifies) the body. */
  async getBlob(digest: string, options: { retry?: boolean } = {}): Promise<Response> {
    const res = await this.request("GET", `/v2/${this.repository}/blobs/${digest}`, {
      headers: { "accept-encoding": "identity" },
      retry: options.retry,
    });
    if (res.status === 404) {
      await drain(res);
      throw new HostError("not_found", `Blob ${digest} is missing from ${this.host}/${this.repository}`);
    }
    await this.expect(res, [200], `download blob ${digest}`);
    return res;
  }

  async hasBlob(digest: string): Promise<boolean> {
    const res = await this.request("HEAD", `/v2/${this.repository}/blobs/${digest}`);
    await drain(res);
    if (res.status === 404) return false;
    await this.expect(res, [200], `check blob ${digest}`);
    return true;
  }

  /** Uploads a blob unless the registry has it; says which happened. */
  async uploadBlob(blob: BlobSource): Promise<"uploaded" | "skipped"> {
    if (await this.hasBlob(blob.digest)) return "skipped";
    await withRetry(() => this.uploadOnce(blob), this.retryOptions());
    return "uploaded";
  }

  /** PUTs a manifest under a tag; returns the digest the registry reports. */
  async putManifest(tag: string, body: Buffer): Promise<string> {
    const res = await this.request("PUT", `/v2/${this.repository}/manifests/${tag}`, {
      headers: { "content-type": MEDIA_TYPE.manifest },
      body: () => body,
    });
    await this.expect(res, [201, 200], `push the manifest of ${this.repository}:${tag}`);
    await drain(res);
    return (
      res.headers.get("docker-content-digest") ?? `sha256:${createHash("sha256").update(body).digest("hex")}`
    );
  }

  private async uploadOnce(blob: BlobSource) {
    const started = await this.request("POST", `/v2/${this.repository}/blobs/uploads/`, { retry: false });
    await this.expect(started, [202], `start the upload of blob ${blob.digest}`);
    await drain(started);
    let location = this.location(started);
    const limit = this.options.monolithicLimitBytes ?? 16 * 1024 * 1024;
    if (blob.size <= limit) {
      const res = await this.request("PUT", withDigest(location, blob.digest), {
        headers: { "content-type": "application/octet-stream", "content-length": String(blob.size) },
        body: () => blob.open(0, blob.size),
        retry: false,
      });
      await this.expect(res, [201], `upload blob ${blob.digest}`);
      await drain(res);
      return;
    }
    const piece = this.options.uploadChunkBytes ?? 64 * 1024 * 1024;
    for (let start = 0; start < blob.size; start += piece) {
      const end = Math.min(blob.size, start + piece);
      const res = await this.request("PATCH", location, {
        headers: {
          "content-type": "application/octet-stream",
          "content-length": String(end - start),
          "content-range": `${start}-${end - 1}`,
        },
        body: () => blob.open(start, end),
        retry: false,
      });
      await this.expect(res, [202], `upload bytes ${start}-${end - 1} of blob ${blob.digest}`);
      await drain(res);
      location = this.location(res);
    }
    const done = await this.request("PUT", withDigest(location, blob.digest), {
      headers: { "content-length": "0" },
      retry: false,
    });
    await this.expect(done, [201], `finish the upload of blob ${blob.digest}`);
    await drain(done);
  }

  private location(res: Response): string {
    const location = res.headers.get("location");
    if (!location) throw new HostError("failed", `${this.host} started an upload without a Location header`);
    return new URL(location, this.baseUrl).toString();
  }

  private retryOptions(): RetryOptions {
    return { ...this.options.retry, signal: this.options.signal };
  }

  /** One request with authentication; transient failures retried unless `retry: false`. */
  private async request(method: string, pathOrUrl: string, init: RequestInit2 = {}): Promise<Response> {
    const url = pathOrUrl.startsWith("http") ? pathOrUrl : `${this.baseUrl}${pathOrUrl}`;
    const once = async () => {
      let reauthenticated = false;
      for (;;) {
        const res = await this.send(method, url, init);
        if (res.status === 401 && !reauthenticated) {
          await drain(res);
          await this.authenticate(res);
          reauthenticated = true;
          continue;
        }
        if (res.status === 401) {
          await drain(res);
          throw this.rejected();
        }
        if (res.status === 403) {
          const detail = await errorDetail(res);
          throw new HostError(
            "failed",
            `${this.host} denied ${method} on ${this.repository}${detail}: the account lacks ${this.options.push ? "push" : "pull"} permission`,
          );
        }
        if (res.status >= 500 || res.status === 429) {
          const detail = await errorDetail(res);
          const retryAfter = Number(res.headers.get("retry-after"));
          throw new TransientError(
            `${this.host} answered ${res.status} to ${method} ${new URL(url).pathname}${detail}`,
            Number.isFinite(retryAfter) && retryAfter > 0 ? Math.min(retryAfter, 60) * 1000 : undefined,
          );
        }
        return res;
      }
    };
    if (init.retry === false) return once();
    return withRetry(once, this.retryOptions());
  }

  private async send(method: string, url: string, init: RequestInit2): Promise<Response> {
    if (this.options.signal?.aborted) throw cancelled(this.options.signal);
    const headers: Record<string, string> = { "user-agent": "hangar", ...init.headers };
    if (this.authorization) headers.authorization = this.authorization;
    const body = init.body?.();
    try {
      return await fetch(url, {
        method,
        headers,
        body: body as unknown as BodyInit | undefined,
        duplex: body ? "half" : undefined,
        signal: this.options.signal,
      } as RequestInit);
    } catch (error) {
      if (this.options.signal?.aborted) throw cancelled(this.options.signal);
      const cause = (error as { cause?: { message?: string; code?: string } }).cause;
      const reason = cause?.code ?? cause?.message ?? (error as Error).message;
      throw Object.assign(new Error(`Could not reach ${this.host} (${reason})`), {
        code: cause?.code ?? "UND_ERR_SOCKET",
      });
    }
  }

  private async authenticate(res: Response) {
    const challenge = parseChallenge(res.headers.get("www-authenticate"));
    const credentials = this.options.credentials;
    if (challenge?.scheme === "basic") {
      if (!credentials) throw this.rejected();
      this.authorization = basicHeader(credentials);
      return;
    }
    if (challenge?.scheme !== "bearer" || !challenge.params.realm) {
      throw new HostError(
        "failed",
        `${this.host} refused access to ${this.repository} without a usable challenge`,
      );
    }
    const tokenUrl = new URL(challenge.params.realm);
    if (challenge.params.service) tokenUrl.searchParams.set("service", challenge.params.service);
    tokenUrl.searchParams.set(
      "scope",
      `repository:${this.repository}:${this.options.push ? "pull,push" : "pull"}`,
    );
    const headers: Record<string, string> = { "user-agent": "hangar" };
    if (credentials) headers.authorization = basicHeader(credentials);
    const tokenRes = await withRetry(async () => {
      const r = await fetch(tokenUrl, { headers, signal: this.options.signal });
      if (r.status >= 500 || r.status === 429) {
        await drain(r);
        throw new TransientError(`the token service of ${this.host} answered ${r.status}`);
      }
      return r;
    }, this.retryOptions());
    if (tokenRes.status === 401 || tokenRes.status === 403) {
      await drain(tokenRes);
      throw this.rejected();
    }
    await this.expect(tokenRes, [200], "get a token");
    const body = (await tokenRes.json().catch(() => ({}))) as { token?: string; access_token?: string };
    const token = body.token ?? body.access_token;
    if (!token) throw new HostError("failed", `The token service of ${this.host} returned no token`);
    this.authorization = `Bearer ${token}`;
  }

  private rejected(): HostError {
    const who = this.options.credentials;
    return new HostError(
      "failed",
      who
        ? `${this.host} rejected the credentials of ${who.username} for ${this.repository}`
        : `${this.host} requires credentials for ${this.repository}: set HANGAR_REGISTRY_USERNAME and HANGAR_REGISTRY_PASSWORD (or GITHUB_USERNAME and GITHUB_TOKEN)`,
    );
  }

  private async expect(res: Response, statuses: number[], what: string) {
    if (statuses.includes(res.status)) return;
    const detail = await errorDetail(res);
    throw new HostError("failed", `Could not ${what}: ${this.host} answered ${res.status}${detail}`);
  }
}

/** The body of a response, refused past `limit` bytes. */
async function readCapped(res: Response, limit: number, what: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of (res.body ?? []) as AsyncIterable<Uint8Array>) {
    size += chunk.length;
    if (size > limit) {
      await res.body?.cancel().catch(() => undefined);
      throw new HostError("failed", `${what} is larger than ${limit} bytes`);
    }
    parts.push(Buffer.from(chunk));
  }
  return Buffer.concat(parts);
}

function withDigest(location: string, digest: string): string {
  const url = new URL(location);
  url.searchParams.set("digest", digest);
  return url.toString();
}

async function drain(res: Response) {
  await res.body?.cancel().catch(() => undefined);
}

/** The registry's own error text (`{"errors":[{"code","message"}]}`), briefly. */
async function errorDetail(res: Response): Promise<string> {
  const text = (await res.text().catch(() => "")).slice(0, ERROR_BODY_LIMIT);
  try {
    const errors = (JSON.parse(text) as { errors?: { code?: string; message?: string }[] }).errors ?? [];
    const first = errors[0];
    if (first) return ` (${[first.code, first.message].filter(Boolean).join(": ")})`;
  } catch {
    // not JSON
  }
  return text.trim() ? ` (${text.trim().slice(0, 200)})` : "";
}
