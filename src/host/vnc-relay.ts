/**
 * `WS /vnc/{name}`: a running VM's VNC server, relayed byte for byte over a WebSocket so that the
 * host page's noVNC client can show the screen. QEMU's VNC listens on loopback with a password
 * (see qemu/vm-details.ts); the relay only ever connects to a loopback address, and the password stays
 * the VNC server's business (the page reads it from the VM record, behind the same token).
 */
import { connect } from "node:net";
import { upgradeWebSocket } from "@hono/node-server";
import type { MiddlewareHandler } from "hono";
import type { WebSocket } from "ws";
import type { Logger } from "../common/logger.js";
import { isLoopbackName } from "../common/origin-policy.js";
import { relaySocket } from "../common/socket-relay.js";
import type { DesktopService } from "./desktops/desktop-service.js";

const UNAVAILABLE = 1011;

export function vncRelay(vms: DesktopService, log?: Logger): MiddlewareHandler {
  return upgradeWebSocket((c) => {
    const name = c.req.param("name") ?? "";
    let closed = false;
    return {
      onOpen: async (_event, ws) => {
        const socket = ws.raw as WebSocket;
        const target = await vncAddress(vms, name).catch((err: Error) => err);
        if (closed) return;
        if (target instanceof Error) return socket.close(UNAVAILABLE, target.message.slice(0, 120));
        relaySocket(socket, connect(target.port, target.host), {
          onTcpError: (err) => log?.debug({ err, vm: name }, "vnc relay: connection failed"),
        });
      },
      onClose: () => {
        closed = true;
      },
      onError: () => {
        closed = true;
      },
    };
  }) as MiddlewareHandler;
}

/** Where the VM's VNC server listens: only a running VM's, and only on loopback. */
async function vncAddress(vms: DesktopService, name: string): Promise<{ host: string; port: number }> {
  let vm = await vms.get(name);
  // A sleeping desktop is woken for the person who opened its screen.
  if (vm.status === "hibernated") vm = (await vms.ensureAwake(name, "the host page's screen")).record;
  const url = "vncUrl" in vm && vm.vncUrl ? new URL(vm.vncUrl) : undefined;
  if (!url) throw new Error(`VM ${name} has no screen: it is not running, or runs without VNC`);
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (!isLoopbackName(host)) throw new Error("The VM's VNC server is not on loopback");
  return { host, port: Number(url.port) };
}
