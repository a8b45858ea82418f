/**
 * The guest disk for the end-to-end test: `HANGAR_GUEST_IMAGE`, or `build/guest/disk.img`, built
 * with scripts/build-guest-image.sh when it is missing (root; a few minutes the first time).
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { resolve } from "node:path";

const REPO = resolve(import.meta.dirname, "..", "..");
export const DEFAULT_GUEST_IMAGE = resolve(REPO, "build", "guest", "disk.img");

export async function ensureGuestImage(): Promise<{ path: string; builtInMs: number | null }> {
  const path = process.env.HANGAR_GUEST_IMAGE || DEFAULT_GUEST_IMAGE;
  if (existsSync(path)) return { path, builtInMs: null };
  const started = Date.now();
  const child = spawn(resolve(REPO, "scripts", "build-guest-image.sh"), ["--output", path], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => {
    output += d;
    process.stdout.write(d);
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const code = await new Promise<number | null>((done) => child.on("exit", done));
  if (code !== 0) throw new Error(`build-guest-image.sh failed (exit ${code}):\n${output.slice(-3000)}`);
  return { path, builtInMs: Date.now() - started };
}
