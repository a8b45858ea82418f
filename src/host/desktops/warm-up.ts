/**
 * A desktop's first screenshot costs more than the next ones: the X connection and its shared
 * memory, the first capture, and the encoders, loaded at their first use (libvips, through sharp,
 * for JPEG, WebP and resizing: 100–200 ms on a loaded machine; PNG's strips on Node's zlib). A pool
 * member counts as ready only once its computer server has answered a screenshot in each way a
 * claimant's first one may ask (JPEG, PNG, scaled down), so that the claimant's first screenshot
 * costs what any other does; a memory snapshot is taken right after them (desktop-service.ts), so
 * that every restore and fork starts warm. These are the computer server's own commands, whichever runtime
 * backs the desktop; a desktop whose server has no `/cmd` (404, 405 or 501: a stand-in that answers
 * `/status` alone, as the tests' tiny guest and light Pods) has nothing to warm.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { RuntimeRecord } from "./runtime.js";

/** The screenshots a member takes before it counts as ready, each a first-use path of its own. */
export const WARM_UP_SCREENSHOTS = [
  { format: "jpeg" },
  { format: "png" },
  { format: "jpeg", scale: 0.5 },
] as const;

/** Between tries of a warm-up that failed (a desktop under load may answer late). */
const RETRY_MS = 250;

/**
 * Takes the warm-up screenshots through the desktop's computer server, trying again until each
 * answers or `timeoutMs` runs out (or `signal` aborts): then it throws, saying what failed. With
 * `retry: false` the first failure throws. "no commands" when the server has no `/cmd`, else "warm".
 */
export async function warmUp(
  record: RuntimeRecord,
  timeoutMs = 30_000,
  { signal, retry = true }: { signal?: AbortSignal; retry?: boolean } = {},
): Promise<"warm" | "no commands"> {
  const url = record.computerServerUrl;
  if (!url) throw new Error(`${record.name} has no computer server to warm up`);
  const deadline = AbortSignal.timeout(timeoutMs);
  const stop = signal ? AbortSignal.any([deadline, signal]) : deadline;
  for (const params of WARM_UP_SCREENSHOTS) {
    let why = "";
    for (;;) {
      const failure = await screenshot(url, record, params, stop);
      if (failure === null) break;
      if (failure === NO_COMMANDS) return "no commands";
      // A request cut short by the deadline says less than the answer before it.
      if (!stop.aborted || !why) why = failure;
      if (stop.aborted || !retry) {
        throw new Error(
          `${record.name} did not answer its warm-up screenshot (${JSON.stringify(params)}): ${why}`,
        );
      }
      await delay(RETRY_MS, undefined, { signal: stop }).catch(() => undefined);
    }
  }
  return "warm";
}

const NO_COMMANDS = "no POST /cmd";
/** What a server that has no `POST /cmd` answers it: not found, method not allowed, not implemented. */
const NO_COMMAND_STATUSES = new Set([404, 405, 501]);

/** One screenshot through `/cmd`; null when it succeeded, else why not. */
async function screenshot(
  url: string,
  record: RuntimeRecord,
  params: object,
  signal: AbortSignal,
): Promise<string | null> {
  try {
    const response = await fetch(new URL("/cmd", url), {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(record.apiKey && { "x-api-key": record.apiKey, "x-container-name": record.name }),
      },
      body: JSON.stringify({ command: "screenshot", params }),
      signal,
    });
    const text = await response.text();
    if (response.ok && text.includes('"success":true')) return null;
    if (NO_COMMAND_STATUSES.has(response.status)) return NO_COMMANDS;
    return `HTTP ${response.status}: ${text.slice(0, 200)}`;
  } catch (err) {
    return (err as Error).message;
  }
}
