/**
 * The limits every runtime holds a desktop's settings to, with lume's messages: a display of
 * `WIDTHxHEIGHT`, a size of memory or disk, a CPU count; and the least memory a container (or Pod)
 * desktop is given.
 */
import { formatBytes, parseLumeSize } from "../../common/sizes.js";
import { HostError } from "../errors.js";

/** The least memory or disk a container or Pod desktop may have. */
export const MIN_CONTAINER_MEMORY = 64 * 1024 ** 2;

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

/** The display as given, once `parseDisplay` takes it. */
export function displayOf(display: string): string {
  parseDisplay(display);
  return display;
}

/** Bytes of a lume size (`4GB`, `512MB`), at least `minimum`; a 400 naming `field` otherwise. */
export function size(text: string, field: string, minimum: number): number {
  let bytes: number;
  try {
    bytes = parseLumeSize(text);
  } catch (err) {
    throw new HostError("invalid_params", (err as Error).message);
  }
  if (bytes < minimum) {
    throw new HostError(
      "invalid_params",
      `Invalid ${field} '${text}': at least ${formatBytes(minimum)} is needed`,
    );
  }
  return bytes;
}

/** A whole number of CPUs from 1 to 1024. */
export function positiveCpu(cpu: number): number {
  if (!Number.isInteger(cpu) || cpu < 1 || cpu > 1024) {
    throw new HostError(
      "invalid_params",
      `Invalid cpu count: ${cpu} (expected a whole number from 1 to 1024)`,
    );
  }
  return cpu;
}
