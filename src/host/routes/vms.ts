/** The VM routes: /svc/vms (list, create), /svc/vms/:name (get, update, delete), clone, run, stop. */
import type { Context, Hono } from "hono";
import { needsMacHost } from "../macos.js";
import { cloneSchema, createSchema, runSchema, stopSchema, updateSchema } from "../requests.js";
import type { HostServices } from "../services.js";
import { jsonBody, storageOf } from "./body.js";

export function vmRoutes(app: Hono, { vms }: HostServices) {
  app.get("/svc/vms", async (c) => c.json(await vms.list(storageOf(c))));

  app.post("/svc/vms", async (c) => {
    const body = await jsonBody(c, createSchema, { required: true });
    const vm = await vms.create({ ...body, storage: storageOf(c, body) });
    return c.json({ message: "VM created successfully", name: vm.name, status: "stopped" });
  });

  app.post("/svc/vms/clone", async (c) => {
    const body = await jsonBody(c, cloneSchema, { required: true });
    const clone = await vms.clone(body);
    return c.json({ message: "VM cloned successfully", source: body.name, destination: clone.name });
  });

  app.get("/svc/vms/:name", async (c) => c.json(await vms.get(c.req.param("name"), storageOf(c))));

  app.delete("/svc/vms/:name", async (c) => {
    await vms.remove(c.req.param("name"), storageOf(c));
    return c.body(null, 200, { "content-type": "application/json" });
  });

  const update = async (c: Context) => {
    const body = await jsonBody(c, updateSchema, { required: true });
    await vms.update(c.req.param("name") ?? "", { ...body, storage: storageOf(c, body) });
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
