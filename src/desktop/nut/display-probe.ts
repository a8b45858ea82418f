/**
 * Checks that an X display accepts connections before nut-js touches it: nut-js segfaults its
 * process when it cannot open the display, so the worker is started only when this passes.
 */
import { connect } from "node:net";
import { CommandError } from "../../common/errors.js";

/** Where a `DISPLAY` value points: a local socket path or a TCP address. */
export function displayAddress(display: string): { path: string } | { host: string; port: number } {
  const match = /^(?<host>[^:]*):(?<number>\d+)(?:\.\d+)?$/.exec(display.trim());
  if (!match?.groups) throw new CommandError("unavailable", `DISPLAY=${display} is not a display name like :0`);
  const { host, number } = match.groups;
  if (host === "" || host === "unix") return { path: `/tmp/.X11-unix/X${number}` };
  return { host, port: 6000 + Number(number) };
}

/** Resolves when the display in `env.DISPLAY` accepts a connection; else `unavailable` saying why. */
export async function probeDisplay(env: Record<string, string | undefined>, timeoutMs = 2000): Promise<void> {
  const display = env.DISPLAY;
  if (!display) throw new CommandError("unavailable", "No display: DISPLAY is not set");
  const address = displayAddress(display);
  // Linux X servers also listen on an abstract socket of the same name; try it first, like Xlib.
  const candidates = "path" in address ? [{ path: `\0${address.path}` }, address] : [address];
  let reason = "";
  for (const candidate of candidates) {
    try {
      await tryConnect(candidate, timeoutMs);
      return;
    } catch (err) {
      reason = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    }
  }
  throw new CommandError("unavailable", `The display ${display} is not reachable (${reason}): is the X server running?`);
}

function tryConnect(options: { path: string } | { host: string; port: number }, timeoutMs: number) {
  return new Promise<void>((resolve, reject) => {
    const socket = connect(options);
    socket.setTimeout(timeoutMs, () => socket.destroy(Object.assign(new Error("timed out"), { code: "ETIMEDOUT" })));
    socket.once("connect", () => {
      socket.destroy();
      resolve();
    });
    socket.once("error", reject);
  });
}
