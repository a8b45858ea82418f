/**
 * The tiny guest of the snapshot tests (scripts/tiny-guest.sh): Debian's kernel and a busybox
 * initramfs whose init keeps a counter in RAM and answers HTTP on the port the host forwards to a
 * guest's computer server. Made once into a cache outside the checkout, with apt.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const TINY_VM = { os: "linux", cpu: 1, memory: "128MB", diskSize: "64MB", display: "640x480" };

/** Builds the guest when the cache lacks it; its directory. */
export function tinyGuest(): string {
  const script = join(import.meta.dirname, "..", "..", "scripts", "tiny-guest.sh");
  return execFileSync(script, [], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }).trim();
}

/** The host project's global set-up: the guest is made (when missing) before its test files start. */
export default function setup() {
  tinyGuest();
}

/** Makes the VM in `dir` boot the tiny guest's kernel (config.json's direct kernel boot keys). */
export function bootTinyGuest(vmDir: string, guest: string) {
  const path = join(vmDir, "config.json");
  const config = JSON.parse(readFileSync(path, "utf8"));
  Object.assign(config, {
    kernel: join(guest, "vmlinuz"),
    initrd: join(guest, "initramfs.cpio.gz"),
    kernelCmdline: "console=ttyS0 quiet",
  });
  writeFileSync(path, JSON.stringify(config, null, 2));
}

export interface GuestStatus {
  status: string;
  counter: number;
  bootId: string;
  time: number;
}

/** One request to a guest's HTTP server (through its forwarded port). */
export async function guest<T = GuestStatus>(baseUrl: string, path: string): Promise<T> {
  const res = await fetch(new URL(path, baseUrl), { signal: AbortSignal.timeout(10_000) });
  if (!res.ok) throw new Error(`${path}: ${res.status}`);
  return (await res.json()) as T;
}
