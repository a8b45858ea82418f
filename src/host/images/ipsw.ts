/**
 * The latest macOS restore image (IPSW) from Apple's public catalog, an XML property list:
 * `MobileDeviceSoftwareVersionsByVersion → * → MobileDeviceSoftwareVersions → VirtualMac2,1 →
 * <build> → Restore → {FirmwareURL, ProductVersion, BuildVersion}`. The catalog's address is a
 * setting, so tests serve a fixture on loopback.
 */
import { fetchFailure } from "../../common/errors.js";
import { HostError } from "../errors.js";

type Plist = string | number | boolean | Plist[] | { [key: string]: Plist };

export interface RestoreImage {
  url: string;
  version: string;
  build: string;
}

export async function latestRestoreImage(catalogUrl: string, timeoutMs = 10_000): Promise<RestoreImage> {
  let text: string;
  try {
    const res = await fetch(catalogUrl, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    text = await res.text();
  } catch (err) {
    const reason = fetchFailure(err);
    throw new HostError(
      "unavailable",
      `Cannot reach the macOS restore-image catalog at ${catalogUrl}: ${reason}`,
    );
  }
  let images: RestoreImage[];
  try {
    images = restoreImages(parsePlist(text));
  } catch (err) {
    throw new HostError(
      "failed",
      `The restore-image catalog at ${catalogUrl} is not a valid property list: ${(err as Error).message}`,
    );
  }
  if (images.length === 0)
    throw new HostError("failed", `The restore-image catalog at ${catalogUrl} lists no restore image`);
  return images.sort((a, b) => compareVersions(b.version, a.version))[0];
}

/** Every `Restore` entry for virtual Macs (any model when none is marked virtual). */
export function restoreImages(root: Plist): RestoreImage[] {
  const found: { model: string; image: RestoreImage }[] = [];
  const walk = (node: Plist, model: string) => {
    if (Array.isArray(node)) {
      for (const child of node) walk(child, model);
      return;
    }
    if (typeof node !== "object") return;
    const restore = node.Restore;
    if (
      restore &&
      typeof restore === "object" &&
      !Array.isArray(restore) &&
      typeof restore.FirmwareURL === "string"
    ) {
      found.push({
        model,
        image: {
          url: restore.FirmwareURL,
          version: String(restore.ProductVersion ?? ""),
          build: String(restore.BuildVersion ?? ""),
        },
      });
    }
    for (const [key, child] of Object.entries(node)) walk(child, /^VirtualMac/.test(key) ? key : model);
  };
  walk(root, "");
  const virtual = found.filter((f) => f.model);
  return (virtual.length > 0 ? virtual : found).map((f) => f.image);
}

function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] || 0) - (pb[i] || 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** A minimal XML property-list reader: dict, array, string, integer, real, true, false, date, data. */
export function parsePlist(xml: string): Plist {
  const tokens =
    xml.replace(/<\?xml[^>]*\?>|<!DOCTYPE[^>]*>|<!--[\s\S]*?-->/g, "").match(/<[^>]+>|[^<]+/g) ?? [];
  let i = 0;
  const next = () => tokens[i++];
  const skipSpace = () => {
    while (i < tokens.length && !tokens[i].startsWith("<") && tokens[i].trim() === "") i++;
  };
  const text = (tag: string) => {
    let value = "";
    while (i < tokens.length && tokens[i] !== `</${tag}>`) value += next();
    next();
    return decodeEntities(value);
  };
  const value = (): Plist => {
    skipSpace();
    const tag = next();
    if (tag === undefined) throw new Error("unexpected end");
    if (tag === "<dict/>") return {};
    if (tag === "<array/>") return [];
    if (tag === "<string/>") return "";
    if (tag === "<true/>") return true;
    if (tag === "<false/>") return false;
    if (tag === "<dict>") {
      const dict: Record<string, Plist> = {};
      for (;;) {
        skipSpace();
        if (tokens[i] === "</dict>") {
          i++;
          return dict;
        }
        if (next() !== "<key>") throw new Error("expected <key>");
        const key = text("key");
        dict[key] = value();
      }
    }
    if (tag === "<array>") {
      const list: Plist[] = [];
      for (;;) {
        skipSpace();
        if (tokens[i] === "</array>") {
          i++;
          return list;
        }
        list.push(value());
      }
    }
    const simple = /^<(string|integer|real|date|data)>$/.exec(tag)?.[1];
    if (simple) {
      const content = text(simple);
      return simple === "integer" || simple === "real" ? Number(content) : content;
    }
    if (tag.startsWith("<plist")) {
      const inner = value();
      return inner;
    }
    throw new Error(`unexpected ${tag.slice(0, 40)}`);
  };
  return value();
}

function decodeEntities(text: string) {
  return text
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, "&");
}
