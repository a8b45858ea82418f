/**
 * VNC for people who want to watch the container's desktop: x11vnc on loopback with a password,
 * and noVNC (websockify serving Debian's noVNC pages) in front of it for a browser.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { VncSettings } from "./settings.js";

export const NOVNC_WEB_ROOT = "/usr/share/novnc";

export interface VncServers {
  stop(): Promise<void>;
}

export async function startVnc(
  settings: VncSettings,
  display: Record<string, string>,
  webHost: string,
): Promise<VncServers> {
  const env = { ...process.env, ...display };
  const dir = await mkdtemp(join(tmpdir(), "hangar-vnc-"));
  // x11vnc reads the password from the file and deletes it (`rm:`), so it never shows in `ps`.
  const passwordFile = join(dir, "password");
  await writeFile(passwordFile, `${settings.password}\n`, { mode: 0o600 });
  const children: ChildProcess[] = [];
  const stop = async () => {
    for (const child of children.reverse()) await terminate(child);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    children.push(
      spawn(
        "x11vnc",
        [
          "-display",
          display.DISPLAY,
          "-rfbport",
          String(settings.port),
          "-localhost",
          "-forever",
          "-shared",
        ].concat(["-passwdfile", `rm:${passwordFile}`, "-quiet", "-nossl", "-noipv6"]),
        { env, stdio: "ignore" },
      ),
    );
    await waitForPort(settings.port, "x11vnc", children[0]);
    children.push(
      spawn(
        "websockify",
        ["--web", NOVNC_WEB_ROOT, `${webHost}:${settings.webPort}`, `127.0.0.1:${settings.port}`],
        { env, stdio: "ignore" },
      ),
    );
    await waitForPort(settings.webPort, "websockify (noVNC)", children[1]);
    return { stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function waitForPort(port: number, name: string, child: ChildProcess, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  let failure: Error | undefined;
  child.once("error", (err) => {
    failure = new Error(`${name} could not be started: ${err.message} (is it installed?)`);
  });
  while (Date.now() < deadline) {
    if (failure) throw failure;
    if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode}`);
    if (await answers(port)) return;
    await sleep(50);
  }
  throw new Error(`${name} did not listen on port ${port} within ${timeoutMs} ms`);
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

async function terminate(child: ChildProcess) {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
  await exited.catch(() => undefined);
  clearTimeout(timer);
}
