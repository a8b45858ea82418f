/**
 * Snapshots, Hangar's extension of lume's API (lume has none): take, list and delete a desktop's
 * snapshots, restore it to one (the reset of an evaluation loop), and fork new desktops from one.
 * `restore` and `fork` take `?wait=ready&timeout=S` as `GET /svc/vms/:name` does: they answer once
 * the computer servers answer.
 */
import type { Hono } from "hono";
import { forkSchema, restoreSchema, snapshotSchema } from "../requests.js";
import type { HostServices } from "../services.js";
import { jsonBody, readyWaitMs } from "./body.js";

export function snapshotRoutes(app: Hono, { vms }: HostServices) {
  app.get("/svc/vms/:name/snapshots", async (c) => c.json(await vms.listSnapshots(c.req.param("name"))));

  app.post("/svc/vms/:name/snapshots", async (c) => {
    const body = await jsonBody(c, snapshotSchema, { required: true });
    return c.json(await vms.snapshot(c.req.param("name"), body.name));
  });

  app.delete("/svc/vms/:name/snapshots/:snapshot", async (c) => {
    await vms.deleteSnapshot(c.req.param("name"), c.req.param("snapshot"));
    return c.json({ message: "Snapshot deleted successfully" });
  });

  app.post("/svc/vms/:name/restore", async (c) => {
    const wait = readyWaitMs(c);
    const body = await jsonBody(c, restoreSchema, { required: true });
    const record = await vms.restore(c.req.param("name"), body.snapshot);
    if (wait === undefined || record.status !== "running") return c.json(record);
    return c.json(await vms.waitReady(record.name, wait, c.req.raw.signal));
  });

  app.post("/svc/vms/:name/fork", async (c) => {
    const wait = readyWaitMs(c);
    const body = await jsonBody(c, forkSchema, { required: true });
    const names = await vms.fork(c.req.param("name"), body);
    const forks = await Promise.all(
      names.map((name) =>
        wait === undefined ? vms.find(name) : vms.waitReady(name, wait, c.req.raw.signal),
      ),
    );
    return c.json({ message: "VM forked successfully", forks });
  });
}
