/**
 * Hibernate and resume (docs/host.md#hibernate-and-resume): `POST /svc/vms/:name/hibernate
 * {"mode"?}` puts a running desktop to sleep and answers its record (`status: "hibernated"`,
 * `hibernation`); `POST /svc/vms/:name/resume[?wait=ready&timeout=S]` wakes it, with the same
 * address, ports and keys. A desktop in the wrong state is a 409, with nothing changed.
 */
import type { Hono } from "hono";
import { hibernateSchema } from "../requests.js";
import type { HostServices } from "../services.js";
import { jsonBody, readyWaitMs } from "./body.js";

export function sleepRoutes(app: Hono, { vms }: HostServices) {
  app.post("/svc/vms/:name/hibernate", async (c) => {
    const body = await jsonBody(c, hibernateSchema, { label: "Invalid hibernate request body" });
    return c.json(await vms.hibernate(c.req.param("name"), body.mode));
  });

  app.post("/svc/vms/:name/resume", async (c) => {
    const wait = readyWaitMs(c);
    const record = await vms.resume(c.req.param("name"));
    if (wait === undefined) return c.json(record);
    return c.json(await vms.waitReady(record.name, wait, c.req.raw.signal));
  });
}
