/**
 * A VM's `config.json`, with lume's field names so that lume's tools and images read it:
 * `os`, `cpuCount`, `memorySize` and `diskSize` in bytes, `macAddress`, `display` (`WxH`),
 * `networkMode`. Written pretty-printed and atomically.
 */
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { writeFileAtomic } from "../common/atomic-write.js";
import { HostError } from "./errors.js";

export const vmConfigSchema = z.looseObject({
  os: z.string(),
  cpuCount: z.number().int().optional(),
  memorySize: z.number().int().optional(),
  diskSize: z.number().int().optional(),
  macAddress: z.string().optional(),
  display: z.string(),
  networkMode: z.string().optional(),
});

export type VmConfig = z.infer<typeof vmConfigSchema>;

export const CONFIG_FILE = "config.json";
export const DISK_FILE = "disk.img";
export const NVRAM_FILE = "nvram.bin";

export async function readVmConfig(dir: string): Promise<VmConfig> {
  const text = await readFile(join(dir, CONFIG_FILE), "utf8");
  return vmConfigSchema.parse(JSON.parse(text));
}

export function writeVmConfig(dir: string, config: VmConfig) {
  return writeFileAtomic(join(dir, CONFIG_FILE), `${JSON.stringify(config, null, 2)}\n`);
}

/** A random unicast, locally administered MAC address. */
export function randomMac(): string {
  const bytes = randomBytes(6);
  bytes[0] = (bytes[0] & 0xfc) | 0x02;
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join(":");
}

const MAX_DISPLAY_SIDE = 8192;

/** `WIDTHxHEIGHT`, both positive integers; throws lume's message otherwise. */
export function parseDisplay(display: string): { width: number; height: number } {
  const match = /^(\d{1,5})x(\d{1,5})$/.exec(display);
  const width = Number(match?.[1]);
  const height = Number(match?.[2]);
  if (!match || width <= 0 || height <= 0) {
    throw new HostError(
      "invalid_params",
      `Invalid display resolution format: ${display}. Expected format: WIDTHxHEIGHT`,
    );
  }
  if (width > MAX_DISPLAY_SIDE || height > MAX_DISPLAY_SIDE) {
    throw new HostError(
      "invalid_params",
      `Display ${display} is too large: at most ${MAX_DISPLAY_SIDE}x${MAX_DISPLAY_SIDE}`,
    );
  }
  return { width, height };
}

/** `nat`, `bridged` or `bridged:<iface>` (case-insensitive), as lume accepts them. */
export function parseNetworkMode(mode: string): string {
  const lower = mode.toLowerCase();
  if (lower === "nat" || lower === "bridged") return lower;
  if (lower.startsWith("bridged:")) return `bridged:${mode.slice("bridged:".length)}`;
  throw new HostError(
    "invalid_params",
    `Invalid network mode '${mode}'. Expected 'nat', 'bridged', or 'bridged:<interface>'.`,
  );
}
