/**
 * The guest disk of the end-to-end tests, made once per run by their global set-up
 * (vitest.e2e.config.ts) so that they boot this checkout: scripts/build-guest-image.sh builds it
 * into /var/cache/hangar-guest ($HANGAR_GUEST_CACHE), outside the checkout, with its Debian part
 * cached there by package list (minutes the first time; then Hangar is only packed again, 23–60 s).
 * `HANGAR_GUEST_IMAGE` names a disk to use as it is instead. A test reads it with `inject("guestImage")`.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { runScript } from "../support/run-script.js";

/** The full guest desktop the end-to-end tests and the guest benchmarks create (`POST /svc/vms`). */
export const GUEST_DESKTOP = {
  os: "linux",
  cpu: 2,
  memory: "2GB",
  diskSize: "8GB",
  display: "1024x768",
} as const;

export interface GuestImage {
  path: string;
  /** How long its build took, or null when `HANGAR_GUEST_IMAGE` gave it. */
  builtInMs: number | null;
}

declare module "vitest" {
  export interface ProvidedContext {
    guestImage: GuestImage;
  }
}

export default async function setup(project: TestProject) {
  project.provide("guestImage", await ensureGuestImage());
}

/** The disk: `HANGAR_GUEST_IMAGE`, or built from this checkout (the benchmarks call it too). */
export async function ensureGuestImage(): Promise<GuestImage> {
  const given = process.env.HANGAR_GUEST_IMAGE;
  if (given) {
    if (!existsSync(given)) throw new Error(`HANGAR_GUEST_IMAGE names no file: ${given}`);
    return { path: given, builtInMs: null };
  }
  const cache = process.env.HANGAR_GUEST_CACHE ?? "/var/cache/hangar-guest";
  const path = join(cache, "disk.img");
  const started = Date.now();
  process.stderr.write(`The guest image of this checkout: scripts/build-guest-image.sh into ${path}\n`);
  const code = await runScript("build-guest-image.sh", ["--output", path, "--cache", join(cache, "cache")]);
  if (code !== 0) throw new Error(`scripts/build-guest-image.sh failed (exit ${code}); its output is above`);
  return { path, builtInMs: Date.now() - started };
}
