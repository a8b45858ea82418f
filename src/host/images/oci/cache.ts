/**
 * The image cache, laid out as lume lays it out: `<cacheDirectory>/ghcr/<organization>/<manifestId>/`
 * (manifestId = the manifest digest with `:` as `_`) holding blobs named by digest, the manifest
 * and, once an image is complete and caching is on, `metadata.json`. One version is kept per
 * image. Pulls keep their finished blobs here whether caching is on or not, so that an
 * interrupted pull resumes; without caching the directory goes once the pull is complete.
 */
import { lstat, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { makeDirectory } from "../../../os/make-directory.js";

export interface CachedImage {
  repository: string;
  imageId: string;
}

/** Seconds between 1970 and 2001-01-01, the epoch of Swift's `Date` as lume encodes it. */
const SWIFT_EPOCH_OFFSET = 978_307_200;

export class ImageCache {
  constructor(readonly directory: string) {}

  get root(): string {
    return join(this.directory, "ghcr");
  }

  manifestDir(organization: string, manifestDigest: string): string {
    return join(this.root, organization, manifestDigest.replace(":", "_"));
  }

  blobPath(dir: string, digest: string): string {
    return join(dir, digest.replace(":", "_"));
  }

  /** Records a complete image and removes the other cached versions of the same image. */
  async markComplete(organization: string, image: string, manifestDigest: string) {
    const dir = this.manifestDir(organization, manifestDigest);
    const metadata = {
      image,
      manifestId: manifestDigest.replace(":", "_"),
      timestamp: Date.now() / 1000 - SWIFT_EPOCH_OFFSET,
    };
    await writeFile(join(dir, "metadata.json"), JSON.stringify(metadata));
    for (const entry of await this.entries(organization)) {
      if (entry.image === image && entry.dir !== dir) await rm(entry.dir, { recursive: true, force: true });
    }
  }

  /** The complete images of an organization, sorted by repository then imageId. */
  async list(organization: string): Promise<CachedImage[]> {
    const images = (await this.entries(organization)).map((entry) => ({
      repository: entry.image,
      imageId: entry.manifestId.slice(0, 12),
    }));
    return images.sort(
      (a, b) => a.repository.localeCompare(b.repository) || a.imageId.localeCompare(b.imageId),
    );
  }

  /** Empties the cache; says how many images and bytes it freed. */
  async prune(): Promise<{ images: number; bytes: number }> {
    let images = 0;
    for (const organization of await readdir(this.root).catch(() => [] as string[])) {
      images += (await this.entries(organization)).length;
    }
    // What the entries hold: the cache directory itself stays, so its own blocks are not freed.
    let bytes = 0;
    for (const entry of await readdir(this.root).catch(() => [] as string[])) {
      bytes += await allocatedBytes(join(this.root, entry));
    }
    await rm(this.root, { recursive: true, force: true });
    await makeDirectory(this.root);
    return { images, bytes };
  }

  private async entries(organization: string) {
    const orgDir = join(this.root, organization);
    const found: { dir: string; image: string; manifestId: string }[] = [];
    for (const name of await readdir(orgDir).catch(() => [] as string[])) {
      const dir = join(orgDir, name);
      try {
        const meta = JSON.parse(await readFile(join(dir, "metadata.json"), "utf8")) as {
          image?: unknown;
          manifestId?: unknown;
        };
        if (typeof meta.image === "string" && typeof meta.manifestId === "string") {
          found.push({ dir, image: meta.image, manifestId: meta.manifestId });
        }
      } catch {
        // an unfinished pull, or not an image directory
      }
    }
    return found;
  }
}

/** Bytes allocated on disk under a path (sparse files count what they use). */
export async function allocatedBytes(path: string): Promise<number> {
  const info = await lstat(path).catch(() => undefined);
  if (!info) return 0;
  if (!info.isDirectory()) return info.blocks * 512;
  let total = info.blocks * 512;
  for (const name of await readdir(path)) total += await allocatedBytes(join(path, name));
  return total;
}
