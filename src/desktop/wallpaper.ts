/**
 * The desktop's wallpaper on X11: any image sharp can read (PNG, JPEG, WebP, …), converted to PNG
 * and set as the root window's background by `xwallpaper`, which also publishes `_XROOTPMAP_ID` for
 * programs that draw pseudo-transparency and keeps the pixmap after it exits.
 */
import { execFile } from "node:child_process";
import { constants } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { CommandError, describeOsError } from "../common/errors.js";
import { type FileSystem, localFileSystem } from "../common/file-system.js";
import { findProgram } from "../os/launch.js";
import { makeOwnedTempDir } from "../os/owned-temp-dir.js";
import { expandPath } from "../os/paths.js";

/** Largest wallpaper file read (a 16k photo is well below). */
const MAX_BYTES = 64 * 1024 * 1024;

/** The image file of a request: a regular file (not a FIFO that would block), at most MAX_BYTES. */
export async function readImageFile(path: string, files: FileSystem = localFileSystem): Promise<Buffer> {
  const full = expandPath(path);
  const file = await files.open(full, constants.O_RDONLY | constants.O_NONBLOCK).catch((err) => {
    throw describeOsError(err, path);
  });
  try {
    const info = await file.stat();
    if (!info.isFile()) throw new CommandError("invalid_params", `Not a regular file: ${path}`);
    if (info.size > MAX_BYTES)
      throw new CommandError("invalid_params", `The image is larger than 64 MiB: ${path}`);
    const data = Buffer.allocUnsafe(info.size);
    let read = 0;
    while (read < data.length) {
      const { bytesRead } = await file.read(data, read, data.length - read, read);
      if (bytesRead === 0) break;
      read += bytesRead;
    }
    return data.subarray(0, read);
  } finally {
    await file.close();
  }
}

const run = promisify(execFile);

export async function setX11Wallpaper(image: Buffer, env: Readonly<Record<string, string>>): Promise<void> {
  needXwallpaper();
  const { default: sharp } = await import("sharp");
  const dir = await makeOwnedTempDir("hangar-wallpaper-");
  try {
    const file = join(dir, "wallpaper.png");
    try {
      await sharp(image, { limitInputPixels: 100_000_000 }).png({ compressionLevel: 1 }).toFile(file);
    } catch (err) {
      throw new CommandError("invalid_params", `Not an image Hangar can read: ${(err as Error).message}`);
    }
    await showX11Wallpaper(file, env);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Shows a PNG or JPEG file as the wallpaper, scaled to cover the screen (no sharp: xwallpaper reads it). */
export async function showX11Wallpaper(file: string, env: Readonly<Record<string, string>>): Promise<void> {
  needXwallpaper();
  await run("xwallpaper", ["--zoom", file], { env: { ...process.env, ...env }, timeout: 15_000 }).catch(
    (err: Error & { stderr?: string }) => {
      throw new CommandError("failed", `xwallpaper failed: ${(err.stderr || err.message).trim()}`);
    },
  );
}

function needXwallpaper() {
  if (!findProgram("xwallpaper")) {
    throw new CommandError(
      "unavailable",
      "Setting the wallpaper needs xwallpaper (apt-get install xwallpaper)",
    );
  }
}
