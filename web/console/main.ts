/**
 * The computer server's web console. Local mode: everything at once. Cloud mode: the login form
 * until a container name and API key are given; they stay in this tab's session storage.
 */
import { apiJson, element, saveCredentials, sharePrefix, Unauthorized } from "./api.js";
import { LiveView } from "./live.js";
import { Playback } from "./playback.js";
import { CommandConsole } from "./runner.js";
import { Timeline } from "./timeline.js";

interface Status {
  version: string;
  uptime_s: number;
  features: string[];
  backend: string | null;
  display: { width: number; height: number } | null;
  display_error: string | null;
}

const live = new LiveView();
(window as unknown as { hangarLive: LiveView }).hangarLive = live;

async function showStatus() {
  const status = await apiJson<Status>("/console/status");
  const panel = element("status");
  const display = status.display
    ? `display ${status.display.width}x${status.display.height}, ${status.backend} backend`
    : status.display_error;
  panel.textContent = `version ${status.version} · ${display} · up ${formatUptime(status.uptime_s)} · ${status.features.join(", ")}`;
  panel.classList.toggle("error", !status.display);
}

function formatUptime(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

/** A share link's page: the desktop and the timeline, nothing that acts. */
async function startShared() {
  document.body.classList.add("shared");
  element("status").textContent = "View-only link: the desktop and its activity, live.";
  element("login").hidden = true;
  element("app").hidden = false;
  live.start();
  await new Timeline((entry) => entry.point && live.mark(entry.point)).start();
}

async function start() {
  if (sharePrefix) return startShared();
  try {
    await showStatus();
  } catch (err) {
    if (err instanceof Unauthorized) return showLogin(err.message);
    throw err;
  }
  element("login").hidden = true;
  element("app").hidden = false;
  setInterval(() => void showStatus().catch(() => undefined), 10_000);
  live.start();
  await new Timeline((entry) => entry.point && live.mark(entry.point)).start();
  await untilReached(() => new CommandConsole().start());
  await untilReached(() => new Playback().start());
}

/**
 * Starts a part of the page, again every 2 s while its requests fail for want of a connection (a
 * proxy that cuts connections while the page loads would otherwise leave the part empty).
 */
async function untilReached(startPart: () => Promise<void>): Promise<void> {
  for (;;) {
    try {
      return await startPart();
    } catch (err) {
      if (!(err instanceof TypeError)) throw err;
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  }
}

function showLogin(reason?: string) {
  element("status").textContent = "Sign in to see this computer.";
  const form = element<HTMLFormElement>("login");
  form.hidden = false;
  if (reason && sessionStorage.length > 0) element("login-error").textContent = reason;
  form.onsubmit = (event) => {
    event.preventDefault();
    const data = new FormData(form);
    saveCredentials({ container: String(data.get("container")), key: String(data.get("key")) });
    void start();
  };
  saveCredentials(undefined);
}

void start();
