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
