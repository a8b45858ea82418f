/**
 * Names of images, repositories and registries, validated before they reach a URL or a path.
 */
import { HostError } from "../../errors.js";

export const DEFAULT_REGISTRY = "ghcr.io";
export const DEFAULT_ORGANIZATION = "trycua";

/** One path component of an OCI repository name (lowercase, separators inside only). */
const COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

export interface ImageReference {
  name: string;
  tag: string;
}

function invalid(message: string): HostError {
  return new HostError("invalid_params", message);
}

/** Parses lume's `name:tag` (exactly one colon, no registry host, no organization). */
export function parseImageReference(image: string): ImageReference {
  const pieces = image.split(":");
  if (pieces.length !== 2 || !pieces[0] || !pieces[1]) {
    throw invalid(`Invalid image format. Expected format: name:tag (got ${JSON.stringify(image)})`);
  }
  return { name: checkImageName(pieces[0]), tag: checkTag(pieces[1]) };
}

export function checkImageName(name: string): string {
  if (name.length > 128 || !name.split("/").every((part) => COMPONENT.test(part))) {
    throw invalid(
      `Invalid image name ${JSON.stringify(name)}: use lowercase letters, digits and single . _ - separators`,
    );
  }
  return name;
}

export function checkTag(tag: string): string {
  if (!TAG.test(tag)) {
    throw invalid(
      `Invalid tag ${JSON.stringify(tag)}: up to 128 letters, digits, _ . -, not starting with . or -`,
    );
  }
  return tag;
}

export function checkOrganization(organization: string): string {
  if (organization.length > 128 || !organization.split("/").every((part) => COMPONENT.test(part))) {
    throw invalid(
      `Invalid organization ${JSON.stringify(organization)}: use lowercase letters, digits and . _ - separators`,
    );
  }
  return organization;
}

/**
 * The base URL of a registry: `https://<host>` for a bare host, plain http for loopback hosts
 * (as docker does), or the scheme given explicitly (`http://host:port`).
 */
export function registryBaseUrl(registry: string): string {
  const explicit = /^(https?):\/\/([^/]+)\/?$/.exec(registry);
  const host = explicit ? explicit[2] : registry;
  if (!HOST.test(host)) {
    throw invalid(`Invalid registry ${JSON.stringify(registry)}: expected a host name with an optional port`);
  }
  if (explicit) return `${explicit[1]}://${host}`;
  const hostname = host.replace(/:\d+$/, "").replace(/^\[|\]$/g, "");
  const loopback = hostname === "localhost" || /^127\./.test(hostname) || hostname === "::1";
  return `${loopback ? "http" : "https"}://${host}`;
}
