/** What the SDK adapters take to reach a desktop: a URL, a client's options, or a `Hangar` client. */
import { Hangar, type HangarOptions } from "./index.js";

export type HangarTarget = string | HangarOptions | Hangar;

/** The client for a target, and whether it was made here (and so is closed with its user). */
export function clientOf(target: HangarTarget): { hangar: Hangar; owned: boolean } {
  if (typeof target === "string") return { hangar: new Hangar({ url: target }), owned: true };
  // A client has `call`; options do not (a client of another copy of this module is a client too).
  if ("call" in target) return { hangar: target, owned: false };
  return { hangar: new Hangar(target), owned: true };
}
