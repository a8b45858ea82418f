/**
 * The VM routes: /svc/vms (list, create), /svc/vms/:name (get, update, delete), clone, run, stop,
 * and Hangar's own: waiting for a desktop to be ready (`GET /svc/vms/:name?wait=ready`) and its
 * console output (`GET /svc/vms/:name/logs`).
 */
import type { Context, Hono } from "hono";
import { stream } from "hono/streaming";
import { z } from "zod";
import { needsMacHost } from "../desktops/macos.js";
import { cloneSchema, createSchema, runSchema, stopSchema, updateSchema } from "../requests.js";
import type { HostServices } from "../services.js";
import { jsonBody, queryParam, readyWaitMs, storageOf } from "./body.js";

const linesSchema = z
  .string()
  .regex(/^\d+$/, { error: "expected a whole number of lines" })
  .transform(Number)
  .optional();
const flagSchema = z
  .enum(["1", "true", "0", "false"], { error: "expected true or false" })
  .transform((v) => v === "1" || v === "true")
  .optional();

export function vmRoutes(app: Hono, { vms, idle }: HostServices) {
  app.get("/svc/vms", async (c) => c.json(await vms.list(storageOf(c))));

  app.post("/svc/vms", async (c) => {
    const { idleTimeout, idleMode, ...body } = await jsonBody(c, createSchema, { required: true });
    if (idleMode !== undefined) vms.assertHibernationMode(idleMode, body.runtime);
    const vm = await vms.create({ ...body, storage: storageOf(c, body) });
    if (idleTimeout !== undefined) await idle.set(vm.name, idleTimeout);
    if (idleMode !== undefined) await idle.setMode(vm.name, idleMode);
    return c.json({
      message: "VM created successfully",
      name: vm.name,
      status: "stopped",
      runtime: vm.runtime,
    });
  });

  app.post("/svc/vms/clone", async (c) => {
    const body = await jsonBody(c, cloneSchema, { required: true });
    const clone = await vms.clone(body);
    return c.json({ message: "VM cloned successfully", source: body.name, destination: clone.name });
  });

  app.get("/svc/vms/:name", async (c) => {
    const name = c.req.param("name");
    const waitMs = readyWaitMs(c);
    if (waitMs === undefined) return c.json(await vms.get(name, storageOf(c)));
    return c.json(await vms.waitReady(name, waitMs, c.req.raw.signal));
  });

  app.get("/svc/vms/:name/logs", async (c) => {
    const lines = queryParam(c, "lines", linesSchema);
    const follow = queryParam(c, "follow", flagSchema) ?? false;
    const controller = new AbortController();
    const logs = await vms.logs(c.req.param("name"), { lines, follow, signal: controller.signal });
    c.header("content-type", "text/plain; charset=utf-8");
    c.header("cache-control", "no-store");
    return stream(c, async (out) => {
      out.onAbort(() => {
        controller.abort();
        logs.destroy();
      });
      try {
        for await (const chunk of logs) await out.write(chunk as Uint8Array);
      } finally {
        controller.abort();
        logs.destroy();
      }
    });
  });

  app.delete("/svc/vms/:name", async (c) => {
    await vms.remove(c.req.param("name"), storageOf(c));
    return c.body(null, 200, { "content-type": "application/json" });
  });

  const update = async (c: Context) => {
    const { idleTimeout, idleMode, ...body } = await jsonBody(c, updateSchema, { required: true });
    const name = c.req.param("name") ?? "";
    // The idle timeout and mode are the service's own (sleep/idle-watcher.ts); the rest is the runtime's.
    const { storage: _where, ...runtimeSettings } = body;
    const settings = Object.values(runtimeSettings).some((value) => value !== undefined);
    const own = idleTimeout !== undefined || idleMode !== undefined;
    const desktop = own ? await vms.find(name, storageOf(c, body)) : undefined;
    if (desktop && idleMode) vms.assertHibernationMode(idleMode, desktop.runtime);
    if (settings || !own) {
      await vms.update(name, { ...body, storage: storageOf(c, body) });
    }
    if (desktop && idleTimeout !== undefined) await idle.set(desktop.name, idleTimeout);
    if (desktop && idleMode !== undefined) await idle.setMode(desktop.name, idleMode);
    return c.json({ message: "VM settings updated successfully" });
  };
  app.patch("/svc/vms/:name", update);
  // The older cua Python client posts here; lume answers 404, Hangar treats it as PATCH.
  app.post("/svc/vms/:name/update", update);

  app.post("/svc/vms/:name/run", async (c) => {
    const body = await jsonBody(c, runSchema, { label: "Invalid run request body" });
    const vm = await vms.run(c.req.param("name"), { ...body, storage: storageOf(c, body) });
    return c.json({ message: "VM start initiated", name: vm.name, status: "pending" }, 202);
  });

  // lume's unattended macOS setup: nothing a Linux host can do.
  app.post("/svc/vms/:name/setup", () => {
    throw needsMacHost("Unattended setup (macOS VMs only)");
  });

  app.post("/svc/vms/:name/stop", async (c) => {
    const body = await jsonBody(c, stopSchema);
    const outcome = await vms.stop(c.req.param("name"), { ...body, storage: storageOf(c, body) });
    // `outcome`: "powered down" (the guest complied), "quit" (it did not, or was not asked), "killed".
    return c.json({ message: "VM stopped successfully", outcome });
  });
}
