/** Drives a desktop's computer server as an agent would: `POST /cmd`, the SSE reply parsed. */

export interface DesktopAddress {
  name: string;
  computerServerUrl: string | null;
  apiKey?: string;
}

export async function desktopCommand(
  desktop: DesktopAddress,
  command: string,
  params: Record<string, unknown> = {},
  timeoutMs = 30_000,
): Promise<{ status: number; result: any }> {
  if (!desktop.computerServerUrl) throw new Error(`${desktop.name} has no computer server URL`);
  const res = await fetch(new URL("/cmd", desktop.computerServerUrl), {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(desktop.apiKey && { "x-api-key": desktop.apiKey, "x-container-name": desktop.name }),
    },
    body: JSON.stringify({ command, params }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  const line = text.split("\n").find((l) => l.startsWith("data: "));
  return { status: res.status, result: line ? JSON.parse(line.slice(6)) : text };
}

/** Width and height of a PNG from its header. */
export function pngSize(base64: string): { width: number; height: number } {
  const bytes = Buffer.from(base64, "base64");
  if (bytes.subarray(1, 4).toString("latin1") !== "PNG") throw new Error("not a PNG");
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}
