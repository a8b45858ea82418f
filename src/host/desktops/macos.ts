/** What a Linux host answers for the macOS-only parts of lume's API. */
import { HostError } from "../errors.js";

export function needsMacHost(what: string): HostError {
  return new HostError(
    "not_supported",
    `${what} needs a macOS host: this host service runs VMs with QEMU on ${process.platform}, which supports Linux guests (os: "linux") only.`,
  );
}
