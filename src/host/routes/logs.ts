/** GET /svc/logs?type=info|error|all&lines=N: the service's own logs, the last N lines of each. */
import type { Hono } from "hono";
import { z } from "zod";
import type { HostServices } from "../services.js";
import { queryParam } from "./body.js";

const typeSchema = z
  .string()
  .transform((t) => t.toLowerCase())
  .pipe(z.enum(["info", "error", "all"], { error: "expected info, error or all" }))
  .default("all");
const linesSchema = z
  .string()
  .regex(/^\d+$/, { error: "expected a whole number of lines" })
  .transform(Number)
  .optional();

export function logRoutes(app: Hono, { log }: HostServices) {
  app.get("/svc/logs", async (c) => {
    const type = queryParam(c, "type", typeSchema);
    const lines = queryParam(c, "lines", linesSchema);
    const body: { info?: string; error?: string } = {};
    if (type !== "error") body.info = await log.tail("info", lines);
    if (type !== "info") body.error = await log.tail("error", lines);
    return c.json(body);
  });
}
