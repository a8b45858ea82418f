/**
 * How Hangar finds its containers again: labels on every container it makes (the engine is the
 * record of container desktops, so a restarted host service reads them back), and the container
 * names it gives (`hangar-<desktop name>`, as `docker ps` shows them).
 */
import { HostError } from "../errors.js";

export const LABEL = {
  /** The desktop's name; present on every container Hangar made. */
  desktop: "dev.hangar.desktop",
  display: "dev.hangar.display",
  diskSize: "dev.hangar.disk-size",
  /** The image the desktop was made from (a clone's or a recreated one's own image is a commit). */
  image: "dev.hangar.image",
  /** The commit this container runs, when it runs one (a clone, a recreated desktop): removed with it. */
  stateImage: "dev.hangar.state-image",
  /** The service gave the desktop a key of its own (cloud mode). */
  keyed: "dev.hangar.keyed",
  /** On a commit: the container and the moment it stopped that the commit was taken of. */
  source: "dev.hangar.source",
} as const;

export const CONTAINER_PREFIX = "hangar-";
/** A container being made to replace another (new limits) carries this until it takes the name. */
export const REPLACEMENT_SUFFIX = "--replacement";
/** Where a desktop's writable layer is kept between two containers (clone, new limits). */
export const STATE_REPOSITORY = "localhost/hangar-state";

export function containerName(name: string): string {
  return `${CONTAINER_PREFIX}${name}`;
}

/** Container names are `[A-Za-z0-9][A-Za-z0-9_.-]*`: a desktop name with `+` or `@` cannot be one. */
export function checkContainerDesktopName(name: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name)) {
    throw new HostError(
      "invalid_params",
      `Invalid name for a container desktop '${name}': use letters, digits and . _ - (a container name cannot hold + or @)`,
    );
  }
  return name;
}
