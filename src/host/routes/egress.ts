/**
 * A desktop's network policy and its egress audit (docs/egress.md):
 * `GET|PUT /svc/vms/:name/network` (the policy; a change holds for the next connection) and
 * `GET /svc/vms/:name/egress?limit=N` (the policy and the last decisions of the egress proxy).
 */
import type { Hono } from "hono";
import { z } from "zod";
import { MAX_EVENTS } from "../egress/audit.js";
import { networkPolicySchema } from "../egress/policy.js";
import type { HostServices } from "../services.js";
import { jsonBody, queryParam } from "./body.js";

const limitSchema = z
  .string()
  .regex(/^\d+$/, { error: "expected a whole number of events" })
  .transform(Number)
  .refine((n) => n >= 1 && n <= MAX_EVENTS, { error: `expected 1 to ${MAX_EVENTS}` })
  .optional();

export function egressRoutes(app: Hono, { vms, egress }: HostServices) {
  app.get("/svc/vms/:name/network", async (c) => {
    const vm = await vms.find(c.req.param("name"));
    return c.json(egress.record(vm.name, vm.runtime));
  });

  app.put("/svc/vms/:name/network", async (c) => {
    const vm = await vms.find(c.req.param("name"));
    const policy = await jsonBody(c, networkPolicySchema, {
      required: true,
      label: "Invalid network policy",
    });
    const network = await egress.change(vm.name, vm.runtime, policy);
    return c.json({ message: "Network policy changed", name: vm.name, network });
  });

  app.get("/svc/vms/:name/egress", async (c) => {
    const limit = queryParam(c, "limit", limitSchema);
    const vm = await vms.find(c.req.param("name"));
    return c.json({
      name: vm.name,
      network: egress.record(vm.name, vm.runtime),
      events: egress.audit.list(vm.name, limit),
    });
  });
}
