/**
 * Bytes both ways between a browser's WebSocket and a TCP connection (a VNC server), for the host
 * page's VM screens and the container's noVNC viewer. A slow browser is not buffered without end:
 * the TCP side stops being read while more than `backlogBytes` wait to be sent. Either side ending
 * ends the other: a TCP error closes the WebSocket with 1011, a TCP close with 1001.
 */
import type { Socket } from "node:net";
import type { WebSocket } from "ws";

const GOING_AWAY = 1001;
const UNAVAILABLE = 1011;
/** Bytes a slow browser may have waiting before the TCP connection stops being read. */
const BACKLOG_BYTES = 4 * 1024 * 1024;

export interface RelayOptions {
  backlogBytes?: number;
  /** Told when the TCP side fails (the WebSocket is closed in any case). */
  onTcpError?: (err: Error) => void;
  /** The close reason sent when the TCP side ends. */
  closedReason?: string;
}

export function relaySocket(ws: WebSocket, tcp: Socket, options: RelayOptions = {}): void {
  const backlog = options.backlogBytes ?? BACKLOG_BYTES;
  tcp.setNoDelay(true);
  tcp.on("data", (data) => {
    if (ws.readyState !== ws.OPEN) return;
    ws.send(data, { binary: true });
    if (ws.bufferedAmount > backlog) {
      tcp.pause();
      // The callback runs once this frame has been written: the browser has caught up with it.
      ws.send(Buffer.alloc(0), { binary: true }, () => tcp.resume());
    }
  });
  tcp.on("error", (err) => {
    options.onTcpError?.(err);
    closeWs(ws, UNAVAILABLE, "The VNC server went away");
  });
  tcp.on("close", () => closeWs(ws, GOING_AWAY, options.closedReason ?? "VNC closed"));
  ws.on("message", (data, isBinary) => {
    if (!isBinary) return;
    for (const chunk of Array.isArray(data) ? data : [data]) {
      tcp.write(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
    }
  });
  const end = () => tcp.destroy();
  ws.on("close", end);
  ws.on("error", end);
  // A connection handed over paused (its first bytes read and put back) flows now.
  tcp.resume();
}

function closeWs(ws: WebSocket, code: number, reason: string) {
  if (ws.readyState === ws.OPEN || ws.readyState === ws.CONNECTING) ws.close(code, reason);
}
