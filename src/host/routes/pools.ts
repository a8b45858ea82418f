/**
 * Warm pools: POST/GET /svc/pools, GET/PATCH/DELETE /svc/pools/:name, POST /svc/pools/:name/claim
 * (a ready desktop's record; 503 when none is ready and the claim does not wait, or its wait runs
 * out), POST /svc/pools/:name/claims/:id/keepalive (a claim's lease renewed), and
 * POST /svc/vms/:name/release (the claimed desktop is removed, the pool refills).
 */
import type { Hono } from "hono";
import { claimSchema, keepaliveSchema, poolCreateSchema, poolUpdateSchema } from "../requests.js";
import type { HostServices } from "../services.js";
import { jsonBody } from "./body.js";

export function poolRoutes(app: Hono, { pools }: HostServices) {
  app.get("/svc/pools", (c) => c.json(pools.list()));

  app.post("/svc/pools", async (c) => {
    const body = await jsonBody(c, poolCreateSchema, { required: true });
    return c.json(await pools.create(body), 201);
  });

  app.get("/svc/pools/:name", (c) => c.json(pools.get(c.req.param("name"))));

  app.patch("/svc/pools/:name", async (c) => {
    const body = await jsonBody(c, poolUpdateSchema, { required: true });
    return c.json(await pools.update(c.req.param("name"), body));
  });

  app.delete("/svc/pools/:name", async (c) => {
    const name = c.req.param("name");
    await pools.remove(name);
    return c.json({ message: "Pool removed", name });
  });

  app.post("/svc/pools/:name/claim", async (c) => {
    const body = await jsonBody(c, claimSchema, { label: "Invalid claim request body" });
    return c.json(await pools.claim(c.req.param("name"), body, c.req.raw.signal));
  });

  // The claim's id is the claimed desktop's name.
  app.post("/svc/pools/:name/claims/:id/keepalive", async (c) => {
    const body = await jsonBody(c, keepaliveSchema, { label: "Invalid keepalive request body" });
    return c.json(await pools.keepalive(c.req.param("name"), c.req.param("id"), body));
  });

  app.post("/svc/vms/:name/release", async (c) => {
    const released = await pools.release(c.req.param("name"));
    return c.json({ message: "Desktop released", ...released });
  });
}
