/** Starts the GTK test window (`a11y-app.py`) on a virtual desktop and lets tests wait for what it prints. */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { PYTHON } from "./desktop.js";

const SCRIPT = fileURLToPath(new URL("./a11y-app.py", import.meta.url));

export interface A11yApp {
  readonly child: ChildProcess;
  /** Every line printed so far. */
  readonly lines: string[];
  /** Resolves with the first line (printed so far or later) that matches. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  stop(): Promise<void>;
}

/** `extraLabels` adds a grid of that many labels, for bigger trees. */
export async function startA11yApp(env: Record<string, string>, extraLabels = 0): Promise<A11yApp> {
  const child = spawn(PYTHON, [SCRIPT, String(extraLabels)], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  let rest = "";
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += String(d);
  });
  child.stdout.on("data", (d) => {
    rest += String(d);
    const parts = rest.split("\n");
    rest = parts.pop() ?? "";
    lines.push(...parts);
    for (const wake of waiters) wake();
  });
  const waitFor = (pattern: RegExp, timeoutMs = 10_000) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const hit = lines.find((l) => pattern.test(l));
        if (!hit) return false;
        waiters.delete(check);
        clearTimeout(timer);
        resolve(hit);
        return true;
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`the GTK app did not print ${pattern} (printed: ${lines.join(" | ")}; ${stderr})`));
      }, timeoutMs);
      if (!check()) waiters.add(check);
    });
  const app: A11yApp = {
    child,
    lines,
    waitFor,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      await exited;
    },
  };
  await waitFor(/^ready$/);
  return app;
}

/**
 * A desktop with an accessibility bus, the GTK test window on it, and a computer server driving
 * both; `stop()` ends all of it.
 */
export async function startA11yDesktop(size = { width: 1280, height: 800 }) {
  const { startVirtualDisplay } = await import("../../src/desktop/virtual-display.js");
  const { atspiProvider } = await import("../../src/desktop/atspi/index.js");
  const { DesktopManager } = await import("../../src/desktop/manager.js");
  const { startTestServer } = await import("./server.js");
  const display = await startVirtualDisplay({ ...size, accessibility: true });
  const app = await startA11yApp(display.env);
  const a11y = atspiProvider(display.env);
  const desktop = new DesktopManager({ display: display.display });
  const server = await startTestServer({ accessibility: a11y, desktop: desktop.provider });
  return {
    display,
    app,
    server,
    async stop() {
      a11y.close();
      await server.close();
      await desktop.close();
      await app.stop();
      await display.stop();
    },
  };
}
