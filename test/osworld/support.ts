/** A desktop with the computer server and its OSWorld controller, and a real HTTP client for the controller. */
import type { ComputerServerOptions } from "../../src/computer/server.js";
import { startDesktopServer } from "../support/desktop.js";

export async function startOsworldDesktop(
  size: { width?: number; height?: number; accessibility?: boolean } = {},
  server: ComputerServerOptions = {},
) {
  const desk = await startDesktopServer(
    { width: 1024, height: 768, ...size },
    { server: { ...server, osworld: { port: 0, openFileTimeoutSeconds: 20, ...server.osworld } } },
  );
  const base = desk.server.osworldUrl;
  if (!base) throw new Error("the OSWorld controller did not start");
  return { ...desk, base };
}

export type OsworldDesktop = Awaited<ReturnType<typeof startOsworldDesktop>>;

/** A JSON POST as OSWorld's client sends it (`requests.post(url, json=...)`). */
export function postJson(base: string, path: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

/** `POST /execute` of one Python line with OSWorld's prefix, as `PythonController.execute_python_command`. */
export async function executePython(base: string, code: string, python = "python") {
  const res = await postJson(base, "/execute", {
    command: [python, "-c", `import pyautogui; import time; pyautogui.FAILSAFE = False; ${code}`],
    shell: false,
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}
