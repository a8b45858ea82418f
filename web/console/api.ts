/**
 * How the page talks to its server: headers on every request and query parameters on WebSocket
 * upgrades carry the cloud credentials, which are kept in this tab's session storage only.
 */
const STORE = "hangar-console-credentials";

/** On a share link's page (`/shared/<token>/`): its routes' prefix, else "". */
export const sharePrefix = /^\/shared\/[^/]+/.exec(location.pathname)?.[0] ?? "";

export interface Credentials {
  container: string;
  key: string;
}

export function savedCredentials(): Credentials | undefined {
  const saved = sessionStorage.getItem(STORE);
  return saved ? (JSON.parse(saved) as Credentials) : undefined;
}

export function saveCredentials(credentials: Credentials | undefined) {
  if (credentials) sessionStorage.setItem(STORE, JSON.stringify(credentials));
  else sessionStorage.removeItem(STORE);
}

export function authHeaders(): Record<string, string> {
  const c = savedCredentials();
  return c ? { "x-container-name": c.container, "x-api-key": c.key } : {};
}

/** Thrown when the server asks for credentials (cloud mode). */
export class Unauthorized extends Error {}

export async function api(path: string, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(path, { ...init, headers: { ...authHeaders(), ...(init.headers ?? {}) } });
  if (res.status === 401) throw new Unauthorized(((await res.json()) as { detail?: string }).detail);
  return res;
}

export async function apiJson<T>(path: string, init?: RequestInit): Promise<T> {
  return (await (await api(path, init)).json()) as T;
}

/** A WebSocket to `path` on this server, with the credentials in the query (upgrade routes only). */
export function openSocket(path: string): WebSocket {
  const url = new URL(path, location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  const c = savedCredentials();
  if (c) {
    url.searchParams.set("container_name", c.container);
    url.searchParams.set("api_key", c.key);
  }
  return new WebSocket(url);
}

/** Calls `onEvent` with each `data:` event of an SSE response body until it ends or `signal` aborts. */
export async function readEvents(res: Response, onEvent: (data: string) => void) {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const chunk = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = chunk
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => line.slice(6))
        .join("\n");
      if (data) onEvent(data);
      end = buffer.indexOf("\n\n");
    }
  }
}

export function element<T extends HTMLElement>(id: string): T {
  return document.getElementById(id) as T;
}

export function make<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Partial<HTMLElementTagNameMap[K]> = {},
  children: (Node | string)[] = [],
): HTMLElementTagNameMap[K] {
  const node = Object.assign(document.createElement(tag), props);
  node.append(...children);
  return node;
}
