/**
 * Vitest global set-up of the host tests, after the project's image (test/support/project-image.ts):
 * E2B's `desktop` template on top of it, which the E2B tests create sandboxes from. Built when its
 * name is missing from the image store (scripts/e2b-desktop-image.sh --if-missing: about a minute
 * from an empty layer cache, as root); CI builds it again after every image build (the README's ci
 * block), so that it is never older than the image it is made from.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { IMAGE_CACHE } from "../support/project-image.js";
import { runScript } from "../support/run-script.js";
import { TEST_DESKTOP_TEMPLATE } from "./e2b-support.js";

function templateBuilt(): boolean {
  for (const driver of ["overlay", "vfs"]) {
    try {
      const images = JSON.parse(
        readFileSync(join(IMAGE_CACHE, `storage-${driver}`, `${driver}-images`, "images.json"), "utf8"),
      ) as { names?: string[] }[];
      if (images.some((image) => image.names?.includes(TEST_DESKTOP_TEMPLATE))) return true;
    } catch {
      // not built there
    }
  }
  return false;
}

export default async function setup() {
  if (templateBuilt()) return;
  process.stderr.write(
    `\nE2B's desktop template ${TEST_DESKTOP_TEMPLATE} is not built yet: scripts/e2b-desktop-image.sh builds it ` +
      `into ${IMAGE_CACHE} (once, about a minute; as root, through sudo otherwise)\n`,
  );
  const code = await runScript("e2b-desktop-image.sh", ["--if-missing"]);
  if (code !== 0 || !templateBuilt()) {
    throw new Error(
      `scripts/e2b-desktop-image.sh did not build ${TEST_DESKTOP_TEMPLATE} (exit ${code}; its log is in ${IMAGE_CACHE}/logs)`,
    );
  }
}
