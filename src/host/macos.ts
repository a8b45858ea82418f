/** What a Linux host answers for the macOS-only parts of lume's API. */
import { CommandError } from "../common/errors.js";

export function needsMacHost(what: string): CommandError {
  return new CommandError(
    "not_supported",
    `${what} needs a macOS host: this host service runs VMs with QEMU on ${process.platform}, which supports Linux guests (os: "linux") only.`,
  );
}
