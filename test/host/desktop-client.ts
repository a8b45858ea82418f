/** Drives a desktop's computer server as an agent would: `POST /cmd`, the SSE reply parsed. */
import { expect } from "vitest";

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

/**
 * A desktop of Hangar's image started as root (docs/egress.md#in-the-container-image): the agent's
 * commands run as the desktop user (10001), the computer server (a root `node`) and its secrets are
 * out of their reach, killing every `node` process (or all it may, `kill -9 -1`) leaves the server
 * answering, and nothing on the
 * display that starts programs (window manager, panel) or takes modules (sound) does it as root.
 */
export async function expectControllerOutOfReach(desktop: DesktopAddress) {
  const run = async (command: string) =>
    (await desktopCommand(desktop, "run_command", { command })).result as { stdout: string; stderr: string };
  expect((await run("id -u")).stdout).toBe("10001\n");
  const nodes = 'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = node ] && basename "$p"; done';
  const owners = (await run(`for p in $(${nodes}); do stat -c %U /proc/$p; done | sort -u`)).stdout;
  expect(owners).toContain("root");
  const secrets = await run("cat /run/secrets/hangar/* 2>&1; ls -ld /run/secrets/hangar");
  expect(secrets.stdout).toMatch(/Permission denied/);
  const killed = await run(`for p in $(${nodes}); do kill -9 $p; done 2>&1; true`);
  expect(killed.stdout).toMatch(/Operation not permitted/);
  const status = await desktopCommand(desktop, "run_command", { command: "echo still here" });
  expect(status.result.stdout).toBe("still here\n");
  // What the agent can drive on the display and which starts programs (the window manager's and the
  // panel's menus) is the desktop user's too; the sound server's clients may not load its modules.
  const desk = await run("ps -o user= -C openbox,lxpanel,menu-cached | sort -u");
  expect(desk.stdout).toBe("hangar\n");
  const sound = await run("pactl load-module module-pipe-sink file=/tmp/from-root 2>&1; echo exit $?");
  expect(sound.stdout).not.toMatch(/exit 0/);
  expect(sound.stdout).toMatch(/denied|refused|failure/i);
  // Every signal the agent may send at once (its own programs go, its command too): the server,
  // root's, answers on.
  await desktopCommand(desktop, "run_command", { command: "kill -9 -1" });
  const after = await desktopCommand(desktop, "run_command", { command: "echo still here" });
  expect(after.result.stdout).toBe("still here\n");
  expect((await desktopCommand(desktop, "screenshot")).result.success).toBe(true);
}
