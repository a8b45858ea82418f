/**
 * The image routes: POST /svc/pull (at once; a container image with `runtime: "container"`), POST
 * /svc/pull/start (background, lume's tracker), POST /svc/vms/push (202, background), GET
 * /svc/images (VM images and container images, each with its `kind`), POST /svc/prune. What the image work
 * means for VM records and for run, update and delete is the VM service's business (VmActivity).
 */
import type { Hono } from "hono";
import { pullSchema, pushSchema } from "../requests.js";
import type { HostServices } from "../services.js";
import { jsonBody, storageOf } from "./body.js";

export function imageRoutes(app: Hono, { images, vms }: HostServices) {
  app.post("/svc/pull", async (c) => {
    const body = await jsonBody(c, pullSchema, { required: true });
    if (body.runtime && body.runtime !== "qemu") {
      await vms.pullImage(body.runtime, body.image);
      return c.json({ message: "Image pulled successfully", image: body.image, runtime: body.runtime });
    }
    const vm = await images.pull({ ...body, storage: storageOf(c, body) });
    // lume answers "default" when no name was given; the VM's real name is in `vmName`.
    return c.json({
      message: "Image pulled successfully",
      image: body.image,
      name: body.name ?? "default",
      vmName: vm.name,
    });
  });

  app.post("/svc/pull/start", async (c) => {
    const body = await jsonBody(c, pullSchema, { required: true });
    const key = await images.startPull({ ...body, storage: storageOf(c, body) });
    return c.json({ message: "Pull started", name: key, image: body.image }, 202);
  });

  app.post("/svc/vms/push", async (c) => {
    const body = await jsonBody(c, pushSchema, { required: true });
    const vm = await images.startPush({ ...body, storage: storageOf(c, body) });
    return c.json(
      { message: "Push initiated in background", name: vm.name, imageName: body.imageName, tags: body.tags },
      202,
    );
  });

  // VM images (lume's cache) and the images runtimes make desktops from, each saying its kind.
  app.get("/svc/images", async (c) => {
    const cached = await images.images(c.req.query("organization") || undefined);
    const vmImages = cached.map((image) => ({ ...image, kind: "vm" as const }));
    return c.json([...vmImages, ...(await vms.runtimeImages())]);
  });

  app.post("/svc/prune", async (c) => {
    const freed = await images.prune();
    return c.json({
      message: "Successfully removed cached images",
      removedImages: freed.images,
      freedBytes: freed.bytes,
    });
  });
}
