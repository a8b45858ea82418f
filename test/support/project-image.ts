/**
 * The project's container image for the tests that run desktops from it (podman's, test/host/podman.ts,
 * and the Kubernetes cluster's): where scripts/test-image.sh keeps it, and, as the global set-up of
 * the projects that hold those tests, its build when it is missing. The first `npm test` on a machine
 * builds it (minutes, as root; the script prints each phase) into /var/cache/hangar-image
 * ($HANGAR_IMAGE_CACHE), outside the checkout; later runs find it there at once. The tests use the
 * image they find: `sudo ./scripts/test-image.sh` builds and checks it again after a change.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { runScript } from "./run-script.js";

export const TEST_IMAGE = process.env.HANGAR_TEST_IMAGE ?? "localhost/hangar:test";
export const IMAGE_CACHE = process.env.HANGAR_IMAGE_CACHE ?? "/var/cache/hangar-image";

/** The image store test-image.sh built into and its storage driver, or undefined when it lacks the image. */
export function findImageStore(): { path: string; driver: string } | undefined {
  for (const driver of ["overlay", "vfs"]) {
    const path = join(IMAGE_CACHE, `storage-${driver}`);
    const index = join(path, `${driver}-images`, "images.json");
    let images: { names?: string[] }[];
    try {
      images = JSON.parse(readFileSync(index, "utf8"));
    } catch {
      continue; // not built there, or being written by a build under way (the set-up waits for it)
    }
    if (images.some((image) => image.names?.includes(TEST_IMAGE))) return { path, driver };
  }
  return undefined;
}

/** The image store, or an error that says how to make it. */
export function imageStore(): { path: string; driver: string } {
  const store = findImageStore();
  if (store) return store;
  throw new Error(
    `The project's image ${TEST_IMAGE} is not built in ${IMAGE_CACHE} (npm test builds it when it is missing; ` +
      "sudo ./scripts/test-image.sh does too)",
  );
}

/** Vitest global set-up: builds the image when it is missing, before any test file of the project starts. */
export default async function setup() {
  if (findImageStore()) return;
  process.stderr.write(
    `\nThe project's image ${TEST_IMAGE} is not built yet: scripts/test-image.sh builds it into ${IMAGE_CACHE} ` +
      "(once per machine, a few minutes; as root, through sudo otherwise)\n",
  );
  // --if-missing: another run that built it meanwhile is enough (the script holds a lock on its cache).
  const code = await runScript("test-image.sh", ["--if-missing"]);
  if (code !== 0 || !findImageStore()) {
    throw new Error(
      `scripts/test-image.sh did not build ${TEST_IMAGE} (exit ${code}; its output is above, its logs in ${IMAGE_CACHE}/logs)`,
    );
  }
}
