/**
 * `WS /wall/{name}[?width=160-960][&fps=1-10]`: one tile of the host page's wall, a running
 * desktop's screen small and view-only. The host connects to the desktop's computer server's
 * `WS /live` (JPEG frames, sent only when the screen changed, scaled there to `width`), with the
 * desktop's key when it has one, and passes the pictures on: the page never holds the key, and
 * nothing the page sends reaches the desktop (no control, no input).
 *
 * Only a running desktop is shown: a hibernated one is not woken (its address wakes it on any
 * connection), a stopped one has nothing to show. The socket is then closed at once with the reason.
 * A slow page is not buffered without end: the desktop's socket stops being read while the page's
 * holds more than a few frames, and the computer server skips frames meanwhile (its newest picture
 * is sent once the page caught up).
 */
import { upgradeWebSocket } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import WebSocket from "ws";
import { z } from "zod";
import type { Logger } from "../common/logger.js";
import { isLoopbackName } from "../common/origin-policy.js";
import type { DesktopService } from "./desktops/desktop-service.js";
import { queryParam } from "./routes/body.js";

const GOING_AWAY = 1001;
const UNAVAILABLE = 1011;
/** Bytes the page may have waiting before the desktop's socket stops being read (a few tiles' frames). */
const BACKLOG_BYTES = 512 * 1024;
/** How long the desktop's computer server may take to accept the socket. */
const HANDSHAKE_MS = 10_000;
/** The largest picture taken from a desktop (a JPEG of at most 960 px wide is far below it). */
const MAX_FRAME_BYTES = 8 * 1024 * 1024;
/** The JPEG quality asked of the desktop: small pictures, still legible at a glance. */
const QUALITY = 60;

const whole = (min: number, max: number, fallback: number) =>
  z
    .string()
    .regex(/^\d+$/, { error: "expected a whole number" })
    .transform(Number)
    .pipe(
      z
        .number()
        .min(min, { error: `at least ${min}` })
        .max(max, { error: `at most ${max}` }),
    )
    .default(fallback);
const widthSchema = whole(160, 960, 320);
const fpsSchema = whole(1, 10, 4);

export interface TileSettings {
  width: number;
  fps: number;
}

/** The tile's settings from the query string; a bad one is a 400 before the upgrade. */
export const wallQuery: MiddlewareHandler = async (c, next) => {
  queryParam(c, "width", widthSchema);
  queryParam(c, "fps", fpsSchema);
  await next();
};

export function wallRelay(vms: DesktopService, log?: Logger): MiddlewareHandler {
  return upgradeWebSocket((c) => {
    const name = c.req.param("name") ?? "";
    const settings: TileSettings = {
      width: queryParam(c, "width", widthSchema),
      fps: queryParam(c, "fps", fpsSchema),
    };
    let closed = false;
    let desktop: WebSocket | undefined;
    const end = () => {
      closed = true;
      desktop?.terminate();
    };
    return {
      onOpen: async (_event, ws) => {
        const page = ws.raw as WebSocket;
        const target = await liveAddress(vms, name).catch((err: Error) => err);
        if (closed) return;
        if (target instanceof Error) return closeWith(page, UNAVAILABLE, target.message);
        desktop = relayTile(page, target, settings, (err) =>
          log?.debug({ err, vm: name }, "wall tile: the desktop's live view failed"),
        );
      },
      onMessage: () => undefined,
      onClose: end,
      onError: end,
    };
  }) as MiddlewareHandler;
}

interface LiveAddress {
  name: string;
  url: URL;
  apiKey?: string;
}

/** The desktop's `WS /live`: only a running desktop's, only on loopback. */
async function liveAddress(vms: DesktopService, name: string): Promise<LiveAddress> {
  const vm = await vms.get(name);
  if (vm.status !== "running") throw new Error(`${name} is ${vm.status}: nothing live to show`);
  const server = "computerServerUrl" in vm ? vm.computerServerUrl : null;
  if (!server) throw new Error(`${name} has no computer server to show its screen`);
  const url = new URL("/live", server);
  if (!isLoopbackName(url.hostname.replace(/^\[|\]$/g, ""))) {
    throw new Error(`${name}'s computer server is not on loopback`);
  }
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return { name: vm.name, url, apiKey: "apiKey" in vm ? vm.apiKey : undefined };
}

/** Pictures from the desktop's live view to the page; returns the desktop's socket. */
function relayTile(
  page: WebSocket,
  target: LiveAddress,
  settings: TileSettings,
  onError: (err: Error) => void,
): WebSocket {
  const desktop = new WebSocket(target.url, {
    headers: target.apiKey ? { "x-api-key": target.apiKey, "x-container-name": target.name } : {},
    perMessageDeflate: false,
    handshakeTimeout: HANDSHAKE_MS,
    maxPayload: MAX_FRAME_BYTES,
  });
  let why = "";
  desktop.on("open", () => {
    desktop.send(JSON.stringify({ type: "settings", codec: "jpeg", quality: QUALITY, ...settings }));
  });
  desktop.on("message", (data, isBinary) => {
    if (page.readyState !== page.OPEN) return;
    if (!isBinary) return passError(page, data);
    // The desktop may send its first picture before it has read the settings: not the tile's size.
    const width = jpegWidth(data as Buffer);
    if (width !== undefined && width > settings.width) return;
    page.send(data as Buffer, { binary: true }, () => {
      if (desktop.isPaused && page.bufferedAmount <= BACKLOG_BYTES) desktop.resume();
    });
    if (page.bufferedAmount > BACKLOG_BYTES) desktop.pause();
  });
  desktop.on("unexpected-response", (_request, response) => {
    response.resume();
    why = `its computer server answered ${response.statusCode}`;
    desktop.terminate();
  });
  desktop.on("error", (err) => {
    why ||= err.message;
    onError(err);
  });
  desktop.on("close", (code, reason) => {
    const said = reason.toString() || why || `closed (${code})`;
    closeWith(page, why ? UNAVAILABLE : GOING_AWAY, `${target.name}'s live view ended: ${said}`);
  });
  return desktop;
}

/** A JPEG's width from its start-of-frame marker (baseline or progressive), if it has one. */
function jpegWidth(jpeg: Buffer): number | undefined {
  for (const marker of [0xc0, 0xc2]) {
    const at = jpeg.indexOf(Buffer.from([0xff, marker]));
    if (at >= 0 && at + 9 <= jpeg.length) return jpeg.readUInt16BE(at + 7);
  }
  return undefined;
}

/** The computer server's `{"type": "error"}` (no picture, and why) is the tile's to show; the rest is not. */
function passError(page: WebSocket, data: WebSocket.RawData) {
  try {
    const message = JSON.parse(String(data)) as { type?: unknown; error?: unknown };
    if (message.type === "error" && typeof message.error === "string") {
      page.send(JSON.stringify({ type: "error", error: message.error.slice(0, 500) }));
    }
  } catch {
    // Not JSON: not for the page.
  }
}

function closeWith(ws: WebSocket, code: number, reason: string) {
  if (ws.readyState !== ws.OPEN && ws.readyState !== ws.CONNECTING) return;
  // A close reason holds at most 123 bytes.
  let text = reason;
  while (Buffer.byteLength(text) > 123) text = text.slice(0, -1);
  ws.close(code, text);
}
