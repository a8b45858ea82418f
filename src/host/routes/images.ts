/**
 * The image routes: POST /svc/pull (at once), POST /svc/pull/start (background, lume's tracker),
 * POST /svc/vms/push (202, background), GET /svc/images, POST /svc/prune. They also add what the
 * image work knows to the VM records: a background pull answers GET /svc/vms/:name with lume's
 * synthetic `pulling` record (or its sticky failure), and a VM being pushed carries a `push` key.
 * Registered before the VM routes so that these hooks run first.
 */
import type { Context, Hono } from "hono";
import { z } from "zod";
import { CommandError } from "../../common/errors.js";
import type { ImageService } from "../image-service.js";
import { vmName } from "../names.js";
import type { HostServices } from "../services.js";
import { jsonBody, storageOf } from "./body.js";

const pullSchema = z.object({
  image: z.string(),
  name: z.string().optional(),
  registry: z.string().optional(),
  organization: z.string().optional(),
  storage: z.string().optional(),
});

const pushSchema = z.object({
  name: z.string(),
  imageName: z.string(),
  tags: z.array(z.string()).max(64),
  registry: z.string().optional(),
  organization: z.string().optional(),
  storage: z.string().optional(),
  chunkSizeMb: z.number().int().min(1).max(16384).optional(),
  singleLayer: z.boolean().optional(),
});

export function imageRoutes(app: Hono, { images }: HostServices) {
  app.use("/svc/vms/:name", async (c, next) => {
    if (c.req.method !== "GET") return next();
    const pulling = images.pullRecord(c.req.param("name"));
    if (pulling) return c.json(pulling);
    await next();
    // A failed pull is reported where no VM of that name answered (it never hides a real VM).
    const failure = c.res.status !== 200 ? images.pullFailure(c.req.param("name")) : undefined;
    if (failure) throw failure;
    await withPushState(c, images);
  });
  app.use("/svc/vms", async (c, next) => {
    await next();
    if (c.req.method === "GET") await withPushState(c, images);
  });

  // While a VM is pushed its disk must not change: no run, update or delete until the push ends.
  const guard = (action: string) => async (c: Context, next: () => Promise<void>) => {
    const name = normalizedName(c.req.param("name") ?? "");
    if (name && images.isPushing(name)) {
      throw new CommandError("failed", `Cannot ${action} ${name}: an image push of it is in progress`);
    }
    await next();
  };
  app.post("/svc/vms/:name/run", guard("run"));
  app.on(["PATCH"], "/svc/vms/:name", guard("modify"));
  app.post("/svc/vms/:name/update", guard("modify"));
  app.delete("/svc/vms/:name", guard("delete"));

  app.post("/svc/pull", async (c) => {
    const body = await jsonBody(c, pullSchema, { required: true });
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

  app.get("/svc/images", async (c) => c.json(await images.images(c.req.query("organization") || undefined)));

  app.post("/svc/prune", async (c) => {
    const freed = await images.prune();
    return c.json({
      message: "Successfully removed cached images",
      removedImages: freed.images,
      freedBytes: freed.bytes,
    });
  });
}

function normalizedName(raw: string): string | undefined {
  try {
    return vmName(raw);
  } catch {
    return undefined; // the VM route says what is wrong with it
  }
}

type VmRecord = { name?: unknown; locationName?: unknown; push?: unknown };

/** Adds `push` to the VM record(s) of a successful JSON answer when a push is known for the VM. */
async function withPushState(c: Context, images: ImageService) {
  if (!images.anyPushes || c.res.status !== 200) return;
  if (!c.res.headers.get("content-type")?.includes("application/json")) return;
  const body = (await c.res.clone().json()) as VmRecord | VmRecord[];
  let changed = false;
  const decorate = (vm: VmRecord) => {
    if (typeof vm?.name !== "string" || typeof vm.locationName !== "string") return vm;
    const push = images.pushState(vm.locationName, vm.name);
    if (!push) return vm;
    changed = true;
    return { ...vm, push };
  };
  const next = Array.isArray(body) ? body.map(decorate) : decorate(body);
  if (!changed) return;
  const headers = new Headers(c.res.headers);
  headers.delete("content-length");
  c.res = new Response(JSON.stringify(next), { status: 200, headers });
}
