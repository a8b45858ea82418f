/**
 * A VM's config.json and its image form: the config blob lume writes plus the manifest
 * annotations that carry CPU, memory, disk size, display and network mode.
 */
import { randomMac } from "../../qemu/vm-config.js";
import { ANNOTATION, type LumeConfigBlob, type Manifest, MEDIA_TYPE } from "./format.js";

/** The config.json fields lume defines; Hangar's own keys ride along untouched. */
export interface VmConfigJson {
  os: string;
  cpuCount?: number;
  memorySize?: number;
  diskSize?: number;
  macAddress?: string;
  display: string;
  networkMode?: string;
  hardwareModel?: string;
  machineIdentifier?: string;
  [key: string]: unknown;
}

/** Hangar's extra keys of config.json travel in the config blob under this key (lume ignores it). */
const EXTRA_KEY = "hangarConfig";
const LUME_KEYS = new Set([
  "os",
  "cpuCount",
  "memorySize",
  "diskSize",
  "macAddress",
  "display",
  "networkMode",
  "hardwareModel",
  "machineIdentifier",
]);

/** The config blob: lume's keys in sorted order, pretty-printed as lume writes it. */
export function configBlob(config: VmConfigJson): Buffer {
  const extra = Object.fromEntries(Object.entries(config).filter(([key]) => !LUME_KEYS.has(key)));
  const blob: LumeConfigBlob & { [EXTRA_KEY]?: Record<string, unknown> } = {
    hardwareModel: config.hardwareModel ?? "",
    ...(Object.keys(extra).length > 0 ? { [EXTRA_KEY]: extra } : {}),
    machineIdentifier: config.machineIdentifier ?? "",
    mediatype: MEDIA_TYPE.config,
    os: config.os,
    storage: [
      { file: "nvram.bin", mediatype: MEDIA_TYPE.nvram },
      { file: "disk.img", mediatype: MEDIA_TYPE.disk },
    ],
  };
  return Buffer.from(JSON.stringify(blob, null, 2));
}

/** The manifest annotations lume writes from a VM's config. */
export function configAnnotations(config: VmConfigJson): Record<string, string> {
  const notes: Record<string, string> = { [ANNOTATION.os]: config.os };
  if (config.cpuCount !== undefined) notes[ANNOTATION.cpuCount] = String(config.cpuCount);
  if (config.memorySize !== undefined) notes[ANNOTATION.memorySize] = String(config.memorySize);
  if (config.diskSize !== undefined) notes[ANNOTATION.diskSize] = String(config.diskSize);
  notes[ANNOTATION.display] = config.display;
  notes[ANNOTATION.networkMode] = config.networkMode ?? "nat";
  return notes;
}

/**
 * config.json for a pulled VM: the config blob and the manifest annotations, defaults display
 * 1920x1080 and network nat, diskSize from the annotation or the disk's size, and a new MAC.
 */
export function configFromImage(blob: unknown, manifest: Manifest, diskBytes: number): VmConfigJson {
  const source = (blob && typeof blob === "object" ? blob : {}) as Record<string, unknown>;
  const notes = manifest.annotations ?? {};
  const extra = source[EXTRA_KEY] && typeof source[EXTRA_KEY] === "object" ? source[EXTRA_KEY] : {};
  const count = (value: string | undefined) => (value && /^\d+$/.test(value) ? Number(value) : undefined);
  const config: VmConfigJson = {
    ...(extra as Record<string, unknown>),
    os: normalizeOs(String(source.os ?? notes[ANNOTATION.os] ?? "linux")),
    cpuCount: count(notes[ANNOTATION.cpuCount]),
    memorySize: count(notes[ANNOTATION.memorySize]),
    diskSize: count(notes[ANNOTATION.diskSize]) ?? diskBytes,
    macAddress: randomMac(),
    display: notes[ANNOTATION.display] || "1920x1080",
    networkMode: notes[ANNOTATION.networkMode] || "nat",
  };
  if (typeof source.hardwareModel === "string" && source.hardwareModel)
    config.hardwareModel = source.hardwareModel;
  if (typeof source.machineIdentifier === "string" && source.machineIdentifier) {
    config.machineIdentifier = source.machineIdentifier;
  }
  for (const key of Object.keys(config)) if (config[key] === undefined) delete config[key];
  return config;
}

function normalizeOs(os: string): string {
  const lower = os.toLowerCase();
  if (lower === "darwin" || lower === "macos") return "macOS";
  return lower;
}
