/**
 * Container image references as Docker's grammar has them (`[host[:port]/]path[:tag][@digest]`),
 * checked before anything reaches the engine: a reference is never given to a shell, but one with
 * characters outside the grammar (`;`, `$`, spaces…) is refused with the character named.
 */
import { HostError } from "../errors.js";

const MAX_LENGTH = 255;
const COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const DOMAIN_PART = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
const DOMAIN = `(?:${DOMAIN_PART}(?:\\.${DOMAIN_PART})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?`;
const TAG = "[\\w][\\w.-]{0,127}";
const DIGEST = "[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,}";
const REFERENCE = new RegExp(`^(?:${DOMAIN}/)?${COMPONENT}(?:/${COMPONENT})*(?::${TAG})?(?:@${DIGEST})?$`);
const ALLOWED = /^[A-Za-z0-9._:/@[\]-]$/;

/** Returns the reference when it is well formed; a clear 400 otherwise. */
export function containerImageReference(text: string): string {
  const invalid = (why: string) =>
    new HostError("invalid_params", `Invalid image reference '${printable(text)}': ${why}`);
  if (text.length === 0) throw invalid("it is empty");
  if (text.length > MAX_LENGTH) throw invalid(`longer than ${MAX_LENGTH} characters`);
  const bad = [...text].find((ch) => !ALLOWED.test(ch));
  if (bad !== undefined) throw invalid(`'${printable(bad)}' is not allowed in an image reference`);
  if (!REFERENCE.test(text)) {
    throw invalid(
      "expected [registry/]name[:tag][@digest], with a lowercase name (e.g. docker.io/library/debian:12)",
    );
  }
  return text;
}

function printable(text: string): string {
  const escaped = JSON.stringify(text).slice(1, -1);
  return escaped.length > 120 ? `${escaped.slice(0, 120)}…` : escaped;
}
