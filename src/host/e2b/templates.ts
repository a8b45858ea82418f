/**
 * What an E2B `templateID` names on this host, in this order:
 *
 * 1. a warm pool of that name: the sandbox is a claim (a desktop already running);
 * 2. `base` (E2B's default template) and `desktop` (`@e2b/desktop`'s): the desktop image and the
 *    desktop template image (deploy/e2b-desktop), each claimed from a pool made of that image
 *    when there is one, made otherwise;
 * 3. a stopped desktop: the sandbox is a clone of it;
 * 4. an image the runtime has (or pulls): a pool of that image when there is one, else a new
 *    desktop of it.
 *
 * Anything else is E2B's 404 `template '…' not found`.
 */

import type { DesktopService } from "../desktops/desktop-service.js";
import type { RuntimeKind } from "../desktops/kinds.js";
import { HostError } from "../errors.js";
import type { PoolManager } from "../pools/pool-manager.js";
import { E2bError } from "./errors.js";

export type TemplateSource =
  | { kind: "pool"; pool: string; runtime: RuntimeKind }
  | { kind: "image"; image: string; runtime: RuntimeKind }
  | { kind: "desktop"; name: string; runtime: RuntimeKind };

export const BASE_TEMPLATE = "base";
export const DESKTOP_TEMPLATE = "desktop";

export interface TemplateOptions {
  /** Where sandboxes made from images run. */
  runtime: RuntimeKind;
  /** The image of the `desktop` template. */
  desktopTemplateImage: string;
}

export class Templates {
  constructor(
    private readonly vms: DesktopService,
    private readonly pools: PoolManager,
    private readonly options: TemplateOptions,
  ) {}

  async resolve(templateID: string): Promise<TemplateSource> {
    const named = this.pools.list().find((pool) => pool.name === templateID);
    if (named) return { kind: "pool", pool: named.name, runtime: named.runtime };
    const runtime = this.vms.runtime(this.options.runtime);
    const alias =
      templateID === BASE_TEMPLATE
        ? runtime.defaultImage
        : templateID === DESKTOP_TEMPLATE
          ? this.options.desktopTemplateImage
          : undefined;
    if (alias !== undefined) return this.fromImage(alias);
    const desktop = await this.vms.find(templateID).catch((err) => {
      if (err instanceof HostError && (err.kind === "not_found" || err.kind === "invalid_params"))
        return undefined;
      throw err;
    });
    if (desktop) return { kind: "desktop", name: desktop.name, runtime: desktop.runtime };
    if (runtime.hasImage && (await runtime.hasImage(templateID).catch(() => false))) {
      return this.fromImage(templateID);
    }
    throw new E2bError(
      404,
      `template '${templateID}' not found: name a warm pool, base, desktop, a stopped desktop or an image ` +
        `the ${runtime.kind} runtime has`,
    );
  }

  /** What a pool's desktops are made from, for a sandbox that cannot be a claim (its own network). */
  made(source: TemplateSource): Exclude<TemplateSource, { kind: "pool" }> {
    if (source.kind !== "pool") return source;
    const pool = this.pools.get(source.pool);
    if (pool.templateKind === "image") return { kind: "image", image: pool.template, runtime: pool.runtime };
    if (pool.templateKind === "desktop")
      return { kind: "desktop", name: pool.template, runtime: pool.runtime };
    throw new E2bError(
      400,
      `Pool ${pool.name} makes its desktops from a snapshot: a sandbox with its own network cannot be one of them (name the image or desktop instead)`,
    );
  }

  /** A pool of this image on the sandboxes' runtime when there is one, else the image itself. */
  private fromImage(image: string | undefined): TemplateSource {
    const runtime = this.options.runtime;
    if (image === undefined) {
      throw new E2bError(
        400,
        `The ${runtime} runtime makes desktops from disks, not images: name a stopped desktop`,
      );
    }
    const pool = this.pools
      .list()
      .find((p) => p.templateKind === "image" && p.template === image && p.runtime === runtime);
    return pool ? { kind: "pool", pool: pool.name, runtime } : { kind: "image", image, runtime };
  }
}
