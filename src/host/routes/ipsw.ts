/** GET /svc/ipsw: the URL of the latest macOS restore image, from Apple's catalog. */
import type { Hono } from "hono";
import { latestRestoreImage } from "../images/ipsw.js";
import type { HostServices } from "../services.js";

export function ipswRoutes(app: Hono, { settings }: HostServices) {
  app.get("/svc/ipsw", async (c) => {
    const image = await latestRestoreImage((await settings.read()).ipswCatalogUrl);
    return c.json({ url: image.url, version: image.version, build: image.build });
  });
}
