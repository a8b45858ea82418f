/**
 * `WS /vnc/{name}`: a running VM's VNC server, relayed byte for byte over a WebSocket so that the
 * host page's noVNC client can show the screen. QEMU's VNC listens on loopback with a password
 * (see vm-details.ts); the relay only ever connects to a loopback address, and the password stays
 * the VNC server's business (the page reads it from the VM record, behind the same token).
 */
import { connect, type Socket } from "node:net";
import { upgradeWebSocket } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import type { WebSocket } from "ws";
import type { Logger } from "../common/logger.js";
import { isLoopbackName } from "../common/origin-policy.js";
import type { VmService } from "./vm-service.js";

/** Bytes a slow browser may have waiting before the VNC connection stops being read. */
const BACKLOG_BYTES = 4 * 1024 * 1024;
const GOING_AWAY = 1001;
const UNAVAILABLE = 1011;

export function vncRelay(vms: VmService, log?: Logger): MiddlewareHandler {
  return upgradeWebSocket((c) => {
    const name = c.req.param("name") ?? "";
    let vnc: Socket | undefined;
    let closed = false;
    return {
      onOpen: async (_event, ws) => {
        const socket = ws.raw as WebSocket;
        const target = await vncAddress(vms, name).catch((err: Error) => err);
        if (closed) return;
        if (target instanceof Error) return socket.close(UNAVAILABLE, target.message.slice(0, 120));
        vnc = connect(target.port, target.host);
        vnc.setNoDelay(true);
        vnc.on("data", (data) => {
          socket.send(data, { binary: true });
          if (socket.bufferedAmount > BACKLOG_BYTES) {
            vnc?.pause();
            socket.send(Buffer.alloc(0), () => vnc?.resume());
          }
        });
        vnc.on("error", (err) => {
          log?.debug({ err, vm: name }, "vnc relay: connection failed");
          socket.close(UNAVAILABLE, "The VM's VNC server went away");
        });
        vnc.on("close", () => socket.close(GOING_AWAY, "VNC closed"));
      },
      onMessage: (event) => {
        const data = event.data;
        if (!vnc || typeof data === "string") return;
        vnc.write(Buffer.from(data as ArrayBuffer));
      },
      onClose: () => {
        closed = true;
        vnc?.destroy();
      },
      onError: () => {
        closed = true;
        vnc?.destroy();
      },
    };
  }) as MiddlewareHandler;
}

/** Where the VM's VNC server listens: only a running VM's, and only on loopback. */
async function vncAddress(vms: VmService, name: string): Promise<{ host: string; port: number }> {
  const vm = await vms.get(name);
  const url = "vncUrl" in vm && vm.vncUrl ? new URL(vm.vncUrl) : undefined;
  if (!url) throw new Error(`VM ${name} has no screen: it is not running, or runs without VNC`);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (!isLoopbackName(host)) throw new Error("The VM's VNC server is not on loopback");
  return { host, port: Number(url.port) };
}
