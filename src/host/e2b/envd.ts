/**
 * What the control plane says to envd, E2B's daemon in every sandbox (served by the desktop's
 * computer server on port 49983): `POST /init` with the sandbox's environment variables and its
 * access token, the way E2B's orchestrator hands them over (never on a command line or in an
 * environment). It goes through the desktop's tunnel like all other traffic, but only from here:
 * the router refuses envd's control routes to everyone else, as E2B's proxy does.
 */
import { request } from "node:http";
import type { Duplex } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { type DesktopAddress, dialPort, TunnelError } from "./tunnel.js";

export const ENVD_PORT = 49983;
/** The envd protocol version the sandboxes speak, as E2B's SDK compares it (it enables features by it). */
export const ENVD_VERSION = "0.6.4";
/** envd's routes that only the control plane may call (E2B's `x-internal`). */
export const ENVD_INTERNAL_PATHS = new Set([
  "/init",
  "/freeze",
  "/unfreeze",
  "/collapse",
  "/fsfreeze",
  "/fsthaw",
]);

export interface EnvdInit {
  envVars: Record<string, string>;
  /** The sandbox's token (`secure`): envd asks for it as `X-Access-Token` from then on. */
  accessToken?: string;
}

/**
 * Sends `/init`; waits up to `waitMs` for envd to listen (it starts beside the computer server).
 * Resolves false when nothing listens on envd's port by then: a desktop whose image has no envd.
 */
export async function initEnvd(address: DesktopAddress, init: EnvdInit, waitMs: number): Promise<boolean> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    let stream: Duplex;
    try {
      stream = await dialPort(address, ENVD_PORT);
    } catch (err) {
      if (!(err instanceof TunnelError) || (err.status !== 502 && err.status !== 404)) throw err;
      // 404: a computer server without the tunnel, so without envd either.
      if (err.status === 404 || Date.now() >= deadline) return false;
      await sleep(200);
      continue;
    }
    await postInit(stream, init);
    return true;
  }
}

async function postInit(stream: Duplex, init: EnvdInit): Promise<void> {
  const body = JSON.stringify({
    envVars: init.envVars,
    ...(init.accessToken && { accessToken: init.accessToken }),
    timestamp: new Date().toISOString(),
  });
  // A sandbox initialised before (a resumed one) takes a new init only with its token.
  const res = await envdRequest(stream, { method: "POST", path: "/init", body, token: init.accessToken });
  if (res.status >= 300) throw new Error(`envd refused /init (${res.status}): ${res.text.trim()}`);
}

/** One sample of the sandbox's use as its envd measures it (`GET /metrics`), or undefined. */
export async function envdMetrics(address: DesktopAddress, token: string | undefined) {
  const stream = await dialPort(address, ENVD_PORT).catch(() => undefined);
  if (!stream) return undefined;
  const res = await envdRequest(stream, { method: "GET", path: "/metrics", token }).catch(() => undefined);
  if (res?.status !== 200) return undefined;
  return JSON.parse(res.text) as Partial<
    Record<
      | "ts"
      | "cpu_count"
      | "cpu_used_pct"
      | "mem_total"
      | "mem_used"
      | "mem_cache"
      | "disk_used"
      | "disk_total",
      number
    >
  >;
}

/** One request to envd over a stream of its own (closed after), with the sandbox's token when it has one. */
function envdRequest(
  stream: Duplex,
  options: { method: string; path: string; body?: string; token?: string },
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        method: options.method,
        host: "localhost",
        port: ENVD_PORT,
        path: options.path,
        createConnection: () => stream,
        headers: {
          ...(options.body !== undefined && {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(options.body),
          }),
          ...(options.token && { "x-access-token": options.token }),
        },
        timeout: 30_000,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          text = (text + chunk).slice(0, 1024 * 1024);
        });
        res.once("end", () => {
          stream.destroy();
          resolve({ status: res.statusCode ?? 0, text });
        });
      },
    );
    req.once("timeout", () => req.destroy(new Error(`envd did not answer ${options.path} within 30 s`)));
    req.once("error", (err) => {
      stream.destroy();
      reject(err);
    });
    req.end(options.body);
  });
}
