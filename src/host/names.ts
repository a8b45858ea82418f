/**
 * VM and location names from requests. A VM name becomes a directory name, so it is checked before
 * it touches the file system: no separators, no `..`, no hidden names, a sane length. A name with
 * exactly one `:` (an image reference such as `ubuntu:24.04`) becomes `ubuntu_24.04`, as lume does.
 */
import { HostError } from "./errors.js";

export const MAX_VM_NAME_LENGTH = 128;
const VM_NAME = /^[A-Za-z0-9][A-Za-z0-9._+@-]*$/;
const LOCATION_NAME = /^[a-zA-Z0-9_-]+$/;

/** Normalizes `name:tag` to `name_tag`, then validates; returns the directory name to use. */
export function vmName(raw: string): string {
  const name = raw.split(":").length === 2 ? raw.replace(":", "_") : raw;
  const invalid = (why: string) =>
    new HostError("invalid_params", `Invalid VM name '${printable(raw)}': ${why}`);
  if (name.length === 0) throw invalid("the name is empty");
  if (name.length > MAX_VM_NAME_LENGTH) throw invalid(`longer than ${MAX_VM_NAME_LENGTH} characters`);
  if (/[/\\]/.test(name)) throw invalid("it contains a path separator");
  if (name.includes("..")) throw invalid("it contains '..'");
  if (!VM_NAME.test(name)) {
    throw invalid(
      "use letters, digits and . _ + @ - (starting with a letter or digit); one ':' is allowed and becomes '_'",
    );
  }
  return name;
}

/** A snapshot's name becomes a directory name inside its VM's: the rules of a VM name, without ':'. */
export const MAX_SNAPSHOT_NAME_LENGTH = 64;
export function snapshotName(name: string): string {
  const invalid = (why: string) =>
    new HostError("invalid_params", `Invalid snapshot name '${printable(name)}': ${why}`);
  if (name.length === 0) throw invalid("the name is empty");
  if (name.length > MAX_SNAPSHOT_NAME_LENGTH)
    throw invalid(`longer than ${MAX_SNAPSHOT_NAME_LENGTH} characters`);
  if (/[/\\]/.test(name)) throw invalid("it contains a path separator");
  if (name.includes("..")) throw invalid("it contains '..'");
  if (!VM_NAME.test(name))
    throw invalid("use letters, digits and . _ + @ - (starting with a letter or digit)");
  return name;
}

/** A pool's name is the start of its desktops' names (`<pool>-<8 hex>`), so it is kept shorter. */
export const MAX_POOL_NAME_LENGTH = 48;
const POOL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

export function poolName(name: string): string {
  const invalid = (why: string) =>
    new HostError("invalid_params", `Invalid pool name '${printable(name)}': ${why}`);
  if (name.length === 0) throw invalid("the name is empty");
  if (name.length > MAX_POOL_NAME_LENGTH) throw invalid(`longer than ${MAX_POOL_NAME_LENGTH} characters`);
  if (name.includes("..") || !POOL_NAME.test(name)) {
    throw invalid("use letters, digits and . _ - (starting with a letter or digit)");
  }
  return name;
}

export function locationName(name: string): string {
  if (!LOCATION_NAME.test(name)) {
    throw new HostError(
      "invalid_params",
      `Invalid location name: ${printable(name)}. Names should be alphanumeric with underscores or dashes.`,
    );
  }
  return name;
}

/** A name as it may appear in a message: control characters escaped, long names cut. */
function printable(text: string): string {
  const escaped = JSON.stringify(text).slice(1, -1);
  return escaped.length > 160 ? `${escaped.slice(0, 160)}…` : escaped;
}
