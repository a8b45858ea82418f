/** Settings routes: /svc/config and the storage locations under /svc/config/locations. */
import type { Hono } from "hono";
import { configSchema, locationSchema } from "../requests.js";
import type { HostServices } from "../services.js";
import { jsonBody } from "./body.js";

export function configRoutes(app: Hono, { settings }: HostServices) {
  app.get("/svc/config", async (c) => {
    const s = await settings.read();
    return c.json({
      vmLocations: s.vmLocations,
      defaultLocationName: s.defaultLocationName,
      homeDirectory: await settings.homeDirectory(),
      cacheDirectory: s.cacheDirectory,
      cachingEnabled: s.cachingEnabled,
      registry: { type: "ghcr", ghcr: s.registry },
      telemetryEnabled: false,
      ipswCatalogUrl: s.ipswCatalogUrl,
      settingsFile: settings.file,
    });
  });

  app.post("/svc/config", async (c) => {
    await settings.configure(await jsonBody(c, configSchema, { required: true }));
    return c.json({ message: "Configuration updated successfully" });
  });

  app.get("/svc/config/locations", async (c) => {
    const s = await settings.read();
    const sorted = [...s.vmLocations].sort((a, b) => a.name.localeCompare(b.name));
    return c.json(sorted.map((l) => ({ ...l, isDefault: l.name === s.defaultLocationName })));
  });

  app.post("/svc/config/locations", async (c) => {
    const body = await jsonBody(c, locationSchema, { required: true });
    const path = await settings.addLocation(body.name, body.path);
    return c.json({ message: "Location added successfully", name: body.name, path });
  });

  app.delete("/svc/config/locations/:name", async (c) => {
    await settings.removeLocation(c.req.param("name"));
    return c.json({ message: "Location removed successfully" });
  });

  app.post("/svc/config/locations/default/:name", async (c) => {
    await settings.setDefaultLocation(c.req.param("name"));
    return c.json({ message: "Default location set successfully" });
  });
}
