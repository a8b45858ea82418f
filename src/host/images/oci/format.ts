/**
 * lume's OCI image format: media types, annotation keys and the manifest shape, so that images
 * pushed by Hangar pull in lume and the other way round.
 *
 * An image is one manifest: the config blob (lume's small JSON), an nvram layer (raw bytes) and
 * one or more gzip-compressed disk layers. A chunked disk has one layer per part, each annotated
 * with its 0-based part number, its byte offset in disk.img and its uncompressed size and digest.
 */
import { z } from "zod";

export const MEDIA_TYPE = {
  manifest: "application/vnd.oci.image.manifest.v1+json",
  config: "application/vnd.trycua.lume.config.v1+json",
  disk: "application/vnd.trycua.lume.disk.v1",
  nvram: "application/vnd.trycua.lume.nvram.v1",
} as const;

export const ANNOTATION = {
  title: "org.opencontainers.image.title",
  uncompressedSize: "org.trycua.lume.content.uncompressed-size",
  uncompressedDigest: "org.trycua.lume.content.uncompressed-digest",
  partNumber: "org.trycua.lume.part.number",
  partTotal: "org.trycua.lume.part.total",
  partOffset: "org.trycua.lume.part.offset",
  chunkSize: "org.trycua.lume.chunk.size",
  uploadTime: "org.trycua.lume.upload-time",
  totalUncompressedSize: "org.trycua.lume.total-uncompressed-size",
  os: "org.trycua.lume.os",
  cpuCount: "org.trycua.lume.cpu-count",
  memorySize: "org.trycua.lume.memory-size",
  diskSize: "org.trycua.lume.disk-size",
  display: "org.trycua.lume.display",
  networkMode: "org.trycua.lume.network-mode",
} as const;

const DIGEST = /^sha256:[a-f0-9]{64}$/;

export const descriptorSchema = z.object({
  mediaType: z.string(),
  digest: z.string().regex(DIGEST, "expected sha256:<64 hex digits>"),
  size: z.number().int().nonnegative(),
  annotations: z.record(z.string(), z.string()).optional(),
});
export type Descriptor = z.infer<typeof descriptorSchema>;

export const manifestSchema = z.object({
  schemaVersion: z.literal(2),
  mediaType: z.string().optional(),
  config: descriptorSchema,
  layers: z.array(descriptorSchema),
  annotations: z.record(z.string(), z.string()).optional(),
});
export type Manifest = z.infer<typeof manifestSchema>;

/** The config blob lume writes (keys sorted; note the lowercase `mediatype`). */
export interface LumeConfigBlob {
  hardwareModel: string;
  machineIdentifier: string;
  mediatype: string;
  os: string;
  storage: { file: string; mediatype: string }[];
}

/** True when the manifest is lume's current format (not its legacy LZ4 one). */
export function isLumeManifest(manifest: Manifest): boolean {
  return (
    manifest.config.mediaType === MEDIA_TYPE.config ||
    manifest.layers.some((layer) => layer.mediaType === MEDIA_TYPE.disk)
  );
}

/** Where one disk layer's bytes go: its blob, offset in disk.img, and sizes to check. */
export interface DiskPart {
  digest: string;
  compressedSize: number;
  offset: number;
  /** Uncompressed bytes, when annotated. */
  size?: number;
  uncompressedDigest?: string;
  partNumber: number;
}

export interface DiskPlan {
  parts: DiskPart[];
  /** The logical size of disk.img, when the manifest says it. */
  totalSize?: number;
}

/**
 * Reads the disk layers of a lume manifest into a plan: parts sorted by part number, their
 * offsets, and the disk's total size. Throws with a message naming the bad annotation.
 */
export function diskPlan(manifest: Manifest): DiskPlan {
  const layers = manifest.layers.filter((layer) => layer.mediaType === MEDIA_TYPE.disk);
  if (layers.length === 0) throw new Error("the image has no disk layer");
  const chunked = layers.length > 1 || layers[0].annotations?.[ANNOTATION.partNumber] !== undefined;
  const parts = layers.map((layer, index): DiskPart => {
    const notes = layer.annotations ?? {};
    const size = optionalCount(notes[ANNOTATION.uncompressedSize], ANNOTATION.uncompressedSize);
    const partNumber = chunked
      ? requiredCount(notes[ANNOTATION.partNumber], ANNOTATION.partNumber, layer.digest)
      : index;
    return {
      digest: layer.digest,
      compressedSize: layer.size,
      offset: chunked ? requiredCount(notes[ANNOTATION.partOffset], ANNOTATION.partOffset, layer.digest) : 0,
      size,
      uncompressedDigest: notes[ANNOTATION.uncompressedDigest],
      partNumber,
    };
  });
  parts.sort((a, b) => a.partNumber - b.partNumber);
  for (let i = 1; i < parts.length; i++) {
    if (parts[i].partNumber === parts[i - 1].partNumber) {
      throw new Error(`the image lists disk part ${parts[i].partNumber} twice`);
    }
  }
  const annotated = optionalCount(
    manifest.annotations?.[ANNOTATION.totalUncompressedSize],
    ANNOTATION.totalUncompressedSize,
  );
  const extent = parts.every((part) => part.size !== undefined)
    ? Math.max(...parts.map((part) => part.offset + (part.size ?? 0)))
    : undefined;
  if (annotated !== undefined && extent !== undefined && extent > annotated) {
    throw new Error(`disk parts reach byte ${extent}, past the annotated disk size ${annotated}`);
  }
  return { parts, totalSize: annotated ?? extent };
}

function optionalCount(value: string | undefined, key: string): number | undefined {
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(number)) {
    throw new Error(`annotation ${key} is not a byte count: ${JSON.stringify(value)}`);
  }
  return number;
}

function requiredCount(value: string | undefined, key: string, digest: string): number {
  const number = optionalCount(value, key);
  if (number === undefined) throw new Error(`disk layer ${digest} has no ${key} annotation`);
  return number;
}
