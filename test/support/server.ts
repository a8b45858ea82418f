/** Starts a real computer server on a free loopback port and talks to it over real HTTP. */
import { type ComputerServerOptions, startComputerServer } from "../../src/computer/server.js";

export async function startTestServer(options: ComputerServerOptions = {}) {
  const server = await startComputerServer({ port: 0, ...options });
  return {
    ...server,
    /** POSTs `/cmd` and returns the HTTP status, the raw body and the parsed `data:` events. */
    async cmd(command: string, params?: unknown, init: RequestInit = {}) {
      return postCmd(server.url, { command, params }, init);
    },
  };
}

export async function postCmd(url: string, body: unknown, init: RequestInit = {}) {
  const res = await fetch(`${url}/cmd`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(init.headers ?? {}) },
    body: (typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body)) as BodyInit,
    ...init,
  });
  const text = await res.text();
  const events = text
    .split("\n\n")
    .filter((chunk) => chunk.startsWith("data: "))
    .map((chunk) => JSON.parse(chunk.slice(6)) as Record<string, any>);
  return {
    status: res.status,
    headers: res.headers,
    text,
    events,
    event: events.at(-1) as Record<string, any>,
  };
}
