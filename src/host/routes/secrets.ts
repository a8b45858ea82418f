/**
 * The secrets the egress proxy adds to desktops' requests (docs/egress.md): `POST /svc/secrets`
 * sets one, `GET /svc/secrets` lists names and dates (never a value, on any route),
 * `DELETE /svc/secrets/:name` removes one that no desktop's policy names.
 */
import type { Hono } from "hono";
import { secretSchema } from "../egress/secrets.js";
import { HostError } from "../errors.js";
import type { HostServices } from "../services.js";
import { jsonBody } from "./body.js";

export function secretRoutes(app: Hono, { egress }: HostServices) {
  app.get("/svc/secrets", (c) =>
    c.json(egress.secrets.list().map((secret) => ({ ...secret, usedBy: egress.usersOf(secret.name) }))),
  );

  app.post("/svc/secrets", async (c) => {
    const body = await jsonBody(c, secretSchema, { required: true, label: "Invalid secret" });
    const created = await egress.secrets.set(body);
    await egress.log.info(created ? "Secret set" : "Secret changed", { secret: body.name });
    return c.json(
      { message: created ? "Secret set" : "Secret changed", name: body.name },
      created ? 201 : 200,
    );
  });

  app.delete("/svc/secrets/:name", async (c) => {
    const name = c.req.param("name");
    const users = egress.usersOf(name);
    if (users.length > 0) {
      throw new HostError(
        "failed",
        `The secret ${name} is named by the network policy of ${users.join(", ")}: change those first`,
      );
    }
    await egress.secrets.remove(name);
    await egress.log.info("Secret deleted", { secret: name });
    return c.json({ message: "Secret deleted", name });
  });
}
