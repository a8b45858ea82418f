/**
 * The desktop container's entrypoint (PID 1 is tini, which reaps the clipboard helpers' exited
 * children): a virtual desktop with the accessibility bus, VNC when asked, then `hangar serve` with
 * the container's arguments. SIGTERM stops the server, then VNC, then the desktop.
 *
 *   node dist/src/container/main.js [hangar serve flags…]
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ALLOCATOR_ENV } from "../common/allocator-env.js";
import { startVirtualDisplay } from "../desktop/virtual-display.js";
import { healthOriginFile } from "./health.js";
import { CONTAINER_SECRET_VARS, containerSettings } from "./settings.js";
import { startVnc, type VncServers } from "./vnc.js";

const HANGAR_BIN = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "bin", "hangar.js");

export async function runContainer(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const settings = containerSettings(env, args);
  // Caught from the start: a stop while the desktop starts still takes everything down.
  const stopSignal = new Promise<NodeJS.Signals>((resolve) => {
    for (const signal of ["SIGTERM", "SIGINT"] as const) process.once(signal, () => resolve(signal));
  });
  const desktop = await startVirtualDisplay({
    width: settings.width,
    height: settings.height,
    accessibility: true,
  });
  let vnc: VncServers | undefined;
  let server: ChildProcess | undefined;
  try {
    if (settings.vnc) vnc = await startVnc(settings.vnc, desktop.env, settings.host);
    for (const file of settings.privateFiles) {
      await mkdir(dirname(file.path), { recursive: true, mode: 0o700 });
      await writeFile(file.path, file.content, { mode: 0o600 });
    }
    const healthFile = healthOriginFile(env);
    await mkdir(dirname(healthFile), { recursive: true });
    await writeFile(healthFile, `${settings.healthOrigin}\n`);
    const serverEnv = { ...ALLOCATOR_ENV, ...env, ...desktop.env };
    for (const name of CONTAINER_SECRET_VARS) delete serverEnv[name];
    server = spawn(process.execPath, [HANGAR_BIN, ...settings.serveArgs], {
      env: serverEnv,
      stdio: "inherit",
    });
    const exited = once(server, "exit").then(([code, signal]) => (code ?? (signal ? 128 : 1)) as number);
    const first = await Promise.race([exited, stopSignal]);
    if (typeof first === "number") return first;
    server.kill("SIGTERM");
    const timer = setTimeout(() => server?.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
    return 0;
  } finally {
    await vnc?.stop();
    await desktop.stop();
    await rm(healthOriginFile(env), { force: true });
    for (const file of settings.privateFiles) await rm(file.path, { force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  runContainer(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: Error) => {
      process.stderr.write(`hangar container: ${err.message}\n`);
      process.exit(2);
    },
  );
}
