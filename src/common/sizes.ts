/** Byte sizes written by people: `64MiB`, `100MB`, `512k`, `1048576`. Binary units throughout. */
const UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
  t: 1024 ** 4,
  tb: 1024 ** 4,
  tib: 1024 ** 4,
};

/** Parses a size; throws an Error whose message says what a valid size looks like. */
export function parseBytes(text: string, defaultUnit = ""): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  const unit = (match?.[2] || defaultUnit).toLowerCase();
  if (!match || !(unit in UNITS)) {
    throw new Error(`Invalid size "${text}": expected a number with an optional unit, e.g. 512MB, 64GB, 1TB`);
  }
  return Math.round(Number(match[1]) * UNITS[unit]);
}

/** lume's size units, checked in this order: the first suffix that matches wins. */
const LUME_UNITS: [string, number][] = [
  ["tb", 1024 ** 4],
  ["gb", 1024 ** 3],
  ["mb", 1024 ** 2],
  ["kb", 1024],
  ["b", 1],
];

/**
 * Parses a size the way lume does (`memory`, `diskSize`): binary units `TB`, `GB`, `MB`, `KB`, `B`
 * (any case), a bare number means GB, decimals are allowed (`1.5GB`). `8G` and `8GiB` are refused.
 * Throws an Error whose message names the input.
 */
export function parseLumeSize(text: string): number {
  const trimmed = text.trim().toLowerCase();
  const unit = LUME_UNITS.find(([suffix]) => trimmed.endsWith(suffix));
  const numeric = unit ? trimmed.slice(0, -unit[0].length).trim() : trimmed;
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)$/.test(numeric)) {
    throw new Error(
      `Malformed size input: ${text}. Could not parse numeric value (expected e.g. 8GB, 512MB, 1.5TB; a bare number means GB).`,
    );
  }
  const bytes = Math.round(Number(numeric) * (unit ? unit[1] : 1024 ** 3));
  if (bytes < 0 || !Number.isSafeInteger(bytes)) {
    throw new Error(`Calculated size out of bounds for UInt64: ${text}`);
  }
  return bytes;
}

/** A byte count for people: `64 MiB`, `1.5 GiB`. */
export function formatBytes(bytes: number): string {
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${Number.isInteger(value) ? value : value.toFixed(1)} ${units[unit]}`;
}
