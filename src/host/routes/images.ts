/**
 * The image routes (pull, push, the local cache and prune). They answer a clear 400 until the OCI
 * image support lands; that work replaces this file.
 */
import type { Hono } from "hono";
import type { HostServices } from "../services.js";

const NOT_YET =
  "Images are not available in this build of the host service yet: pull, push, images and prune will come with the OCI image support.";

export function imageRoutes(app: Hono, _services: HostServices) {
  app.post("/svc/pull", (c) => c.json({ message: NOT_YET }, 400));
  app.post("/svc/pull/start", (c) => c.json({ message: NOT_YET }, 400));
  app.post("/svc/vms/push", (c) => c.json({ message: NOT_YET }, 400));
  app.get("/svc/images", (c) => c.json({ message: NOT_YET }, 400));
  app.post("/svc/prune", (c) => c.json({ message: NOT_YET }, 400));
}
