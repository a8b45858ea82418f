/**
 * A desktop's first screenshot costs more than the next ones (the X connection, the encoder, the
 * panel drawn for the first time): a pool takes it before it hands the desktop out, so that the
 * claimant's first screenshot is as quick as any other. It is the computer server's own command,
 * whichever runtime backs the desktop.
 */
import type { RuntimeRecord } from "../runtimes/runtime.js";

/** Takes one screenshot through the desktop's computer server; false when it did not answer. */
export async function warmUp(record: RuntimeRecord, timeoutMs = 30_000): Promise<boolean> {
  if (!record.computerServerUrl) return false;
  try {
    const response = await fetch(new URL("/cmd", record.computerServerUrl), {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(record.apiKey && { "x-api-key": record.apiKey, "x-container-name": record.name }),
      },
      body: JSON.stringify({ command: "screenshot", params: {} }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    return response.ok && text.includes('"success":true');
  } catch {
    return false;
  }
}
