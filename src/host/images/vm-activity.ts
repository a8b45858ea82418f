/**
 * What the image work (pulls and pushes) means for VMs: the image service implements VmActivity,
 * the VM service is given it and merges it into records and checks it before changing a VM.
 */
import type { VmRef } from "../qemu/vm-store.js";

/** The `push` key of a VM's record while and after it is pushed. */
export interface PushState {
  status: "pushing" | "pushed" | "failed";
  imageName: string;
  tags: string[];
  registry: string;
  organization: string;
  /** Percent of the disk compressed and handed to the registry. */
  progress: number;
  uploadedBytes: number;
  startedAt: string;
  finishedAt: string | null;
  manifestDigest: string | null;
  error: string | null;
}

/** lume's record of a VM that a background pull is creating. */
export interface PullRecord {
  name: string;
  status: "pulling";
  downloadProgress: number;
}

/**
 * What the image work (pulls and pushes) has to say about VMs, given to the VM service so that
 * it alone decides what a VM's record says and what may happen to it.
 */
export interface VmActivity {
  /** A VM of this name now exists: a failed pull into the name is history. */
  record(name: string): void;
  /** Throws when image work on the VM forbids `action` (run, modify, delete) now. */
  assertIdle(vm: VmRef, action: string): void;
  /** lume's record of a pull creating a VM under this name (as requested), or undefined. */
  pulling(name: string): PullRecord | undefined;
  /** Why the last pull into this name failed, or undefined. */
  pullFailure(name: string): Error | undefined;
  /** The VM's last push, or undefined. */
  push(vm: VmRef): PushState | undefined;
}
