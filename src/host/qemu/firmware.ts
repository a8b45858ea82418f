/**
 * UEFI firmware for the guests: OVMF's code image (read-only) and its variable-store template,
 * which every new VM copies into its own `nvram.bin`. Without OVMF the VMs boot with QEMU's BIOS.
 * `HANGAR_OVMF_CODE` and `HANGAR_OVMF_VARS` name another pair.
 */
import { existsSync } from "node:fs";

export interface Firmware {
  code: string;
  vars: string;
}

/** Code and vars must come from the same build and size, so they are listed in pairs. */
const PAIRS: Firmware[] = [
  { code: "/usr/share/OVMF/OVMF_CODE_4M.fd", vars: "/usr/share/OVMF/OVMF_VARS_4M.fd" },
  { code: "/usr/share/OVMF/OVMF_CODE.fd", vars: "/usr/share/OVMF/OVMF_VARS.fd" },
  { code: "/usr/share/edk2/ovmf/OVMF_CODE.fd", vars: "/usr/share/edk2/ovmf/OVMF_VARS.fd" },
  { code: "/usr/share/edk2/x64/OVMF_CODE.4m.fd", vars: "/usr/share/edk2/x64/OVMF_VARS.4m.fd" },
  { code: "/usr/share/edk2-ovmf/x64/OVMF_CODE.fd", vars: "/usr/share/edk2-ovmf/x64/OVMF_VARS.fd" },
];

let found: Firmware | null | undefined;

/** The first installed OVMF pair, or null when there is none. */
export function findFirmware(): Firmware | null {
  if (found !== undefined) return found;
  const { HANGAR_OVMF_CODE: code, HANGAR_OVMF_VARS: vars } = process.env;
  const candidates = code && vars ? [{ code, vars }, ...PAIRS] : PAIRS;
  found = candidates.find((pair) => existsSync(pair.code) && existsSync(pair.vars)) ?? null;
  return found;
}
