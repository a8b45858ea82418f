/**
 * The container engine, through the Docker Engine API (dockerode): Docker's daemon, or podman's
 * Docker-compatible API service (`podman system service --time=0 unix:///run/podman/podman.sock`).
 * Where it is: `--container-engine unix:///path.sock` (or `tcp://host:port`), else `DOCKER_HOST`,
 * else Docker's socket, else podman's. Its failures become `HostError`s that name the engine.
 */
import { existsSync } from "node:fs";
import Docker from "dockerode";
import { HostError } from "../errors.js";

export const DOCKER_SOCKET = "/var/run/docker.sock";
export const PODMAN_SOCKET = "/run/podman/podman.sock";

export interface Engine {
  docker: Docker;
  /** Where it is, as a person would write it (`unix:///run/podman/podman.sock`). */
  address: string;
}

/** Connects (lazily: nothing is sent until the first request) to the engine `address` names. */
export function connectEngine(address?: string, env: NodeJS.ProcessEnv = process.env): Engine {
  const given = address || env.DOCKER_HOST || defaultSocket();
  let url: URL;
  try {
    url = new URL(given.startsWith("/") ? `unix://${given}` : given);
  } catch {
    throw invalidAddress(given);
  }
  if (url.protocol === "unix:") {
    const socketPath = decodeURIComponent(url.pathname);
    if (!socketPath.startsWith("/")) throw invalidAddress(given);
    return { docker: new Docker({ socketPath }), address: `unix://${socketPath}` };
  }
  if (url.protocol === "tcp:" || url.protocol === "http:") {
    const port = Number(url.port || 2375);
    return {
      docker: new Docker({ host: url.hostname.replace(/^\[|\]$/g, ""), port, protocol: "http" }),
      address: `tcp://${url.host}`,
    };
  }
  throw invalidAddress(given);
}

function defaultSocket(): string {
  if (existsSync(DOCKER_SOCKET)) return `unix://${DOCKER_SOCKET}`;
  return `unix://${PODMAN_SOCKET}`;
}

function invalidAddress(given: string) {
  return new Error(
    `invalid container engine address '${given}': expected unix:///path/to/engine.sock or tcp://host:port`,
  );
}

/** The engine's HTTP status on a failed request (dockerode's `statusCode`), or undefined. */
export function statusOf(err: unknown): number | undefined {
  const code = (err as { statusCode?: unknown }).statusCode;
  return typeof code === "number" ? code : undefined;
}

/** The engine's own words on a failed request (its JSON `message`, or `cause`), else the error's. */
export function engineMessage(err: unknown): string {
  const json = (err as { json?: { message?: string; cause?: string } }).json;
  const message = json?.message ?? (err as Error).message ?? String(err);
  return message.replace(/^\(HTTP code \d+\) [a-z ]+ - /, "").trim();
}

const UNREACHABLE = new Set(["ECONNREFUSED", "ENOENT", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH"]);

/**
 * Turns an engine failure into a `HostError`: an engine that cannot be reached is `unavailable`
 * (said with its address), a 404 `not_found`, anything else a failed operation in the engine's words.
 */
export function engineError(err: unknown, engine: Engine, doing: string): HostError {
  if (err instanceof HostError) return err;
  const code = (err as NodeJS.ErrnoException).code;
  if (code && UNREACHABLE.has(code)) {
    return new HostError(
      "unavailable",
      `The container engine at ${engine.address} does not answer (${code}) while ${doing}: ` +
        "is it running? (podman system service --time=0, or Docker's daemon)",
    );
  }
  const status = statusOf(err);
  if (status === 404) return new HostError("not_found", `${doing}: ${engineMessage(err)}`);
  return new HostError("failed", `${doing} failed: ${engineMessage(err)}`);
}
