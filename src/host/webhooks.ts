/**
 * Lifecycle events posted to URLs the operator configured (`--webhook URL`, repeatable): one JSON
 * event per POST, in order per URL, retried with backoff on a network failure or a 5xx/429 (five
 * tries, then the event is given up and logged). With a secret (`--webhook-secret-file`), each
 * POST carries `X-Hangar-Signature: sha256=<HMAC of the body>` so the receiver can tell it is ours;
 * the secret itself is never sent or logged. A receiver that stays away cannot hold the service's
 * memory: past 1,000 waiting events per URL the oldest are dropped, and said so.
 */
import { createHmac } from "node:crypto";
import type { LifecycleEvent, LifecycleEvents } from "./events.js";
import type { HostLog } from "./host-log.js";
import { TransientError, withRetry } from "./images/oci/retry.js";

export interface WebhookOptions {
  urls: string[];
  secret?: string;
  /** Tries per event, the first included (default 5). */
  attempts?: number;
  /** The first retry's delay (default 500 ms; it doubles). */
  baseDelayMs?: number;
}

const QUEUE_LIMIT = 1000;
const REQUEST_TIMEOUT_MS = 10_000;

/** Checks a webhook URL: http or https, no credentials in it. */
export function webhookUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`--webhook: not a URL: ${text}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new Error(`--webhook: expected an http or https URL, got ${url.protocol}`);
  }
  if (url.username || url.password) {
    throw new Error("--webhook: put no credentials in the URL (use --webhook-secret-file to sign posts)");
  }
  return url.href;
}

export class Webhooks {
  private readonly queues: { url: string; waiting: LifecycleEvent[]; busy: boolean }[];
  private readonly stop = new AbortController();
  private readonly unsubscribe: () => void;
  private idle: Promise<void> = Promise.resolve();
  private settle?: () => void;

  constructor(
    events: LifecycleEvents,
    private readonly options: WebhookOptions,
    private readonly log: HostLog,
  ) {
    this.queues = options.urls.map((url) => ({ url, waiting: [], busy: false }));
    this.unsubscribe = events.subscribe((event) => {
      for (const queue of this.queues) {
        queue.waiting.push(event);
        if (queue.waiting.length > QUEUE_LIMIT) {
          const dropped = queue.waiting.shift();
          void this.log.error("A webhook is too far behind: its oldest waiting event is dropped", {
            url: queue.url,
            event: dropped?.id,
          });
        }
        this.pump(queue);
      }
    });
  }

  /** Resolves when nothing waits to be posted (for tests and shutdown). */
  settled(): Promise<void> {
    return this.idle;
  }

  close() {
    this.unsubscribe();
    this.stop.abort();
  }

  private pump(queue: Webhooks["queues"][number]) {
    if (queue.busy || this.stop.signal.aborted) return;
    queue.busy = true;
    if (!this.settle) this.idle = new Promise((resolve) => (this.settle = resolve));
    void (async () => {
      while (queue.waiting.length > 0 && !this.stop.signal.aborted) {
        const event = queue.waiting[0] as LifecycleEvent;
        try {
          await this.post(queue.url, event);
        } catch (error) {
          if (this.stop.signal.aborted) break;
          void this.log.error("A webhook post failed; the event is given up", {
            url: queue.url,
            event: event.id,
            type: event.type,
            error: (error as Error).message,
          });
        }
        queue.waiting.shift();
      }
      queue.busy = false;
      if (this.queues.every((q) => !q.busy)) {
        this.settle?.();
        this.settle = undefined;
      }
    })();
  }

  private post(url: string, event: LifecycleEvent) {
    const body = JSON.stringify(event);
    const headers: Record<string, string> = {
      "content-type": "application/json",
      "x-hangar-event": event.type,
      "x-hangar-event-id": String(event.id),
    };
    if (this.options.secret) {
      headers["x-hangar-signature"] =
        `sha256=${createHmac("sha256", this.options.secret).update(body).digest("hex")}`;
    }
    return withRetry(
      async () => {
        const response = await fetch(url, {
          method: "POST",
          headers,
          body,
          redirect: "error",
          signal: AbortSignal.any([this.stop.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]),
        });
        await response.body?.cancel();
        if (response.status >= 500 || response.status === 429) {
          throw new TransientError(`the receiver answered ${response.status}`);
        }
        if (!response.ok) throw new Error(`the receiver answered ${response.status}`);
      },
      {
        attempts: this.options.attempts ?? 5,
        baseDelayMs: this.options.baseDelayMs ?? 500,
        maxDelayMs: 30_000,
        signal: this.stop.signal,
      },
    );
  }
}
