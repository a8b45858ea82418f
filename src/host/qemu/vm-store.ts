/**
 * The VMs on disk. A VM is a directory `<location>/<name>/` with `config.json`, a raw sparse
 * `disk.img` and `nvram.bin`. A VM being created, cloned or moved is built in a hidden temporary
 * directory beside its final place and renamed into it when complete, so a crash never leaves a
 * half-made VM in the list; a VM being deleted is first renamed out of the list.
 */
import { randomBytes } from "node:crypto";
import { copyFile, mkdir, open, readdir, rename, rm, stat, truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { holderAlive, holderId } from "../../os/holder-lock.js";
import { processRunning } from "../../os/pid.js";
import type { DiskUsage } from "../desktops/desktop-details.js";
import { HostError } from "../errors.js";
import { ensureWritableDirectory, type Location, type SettingsStore } from "../settings.js";
import { copyDisk, resizeOverlay } from "./disk.js";
import { findFirmware } from "./firmware.js";
import {
  CONFIG_FILE,
  DISK_FILE,
  NVRAM_FILE,
  randomMac,
  readVmConfig,
  type VmConfig,
  writeVmConfig,
} from "./vm-config.js";

export interface VmRef {
  name: string;
  dir: string;
  location: Location;
}

const TEMP_PREFIX = ".hangar-tmp-";

export class VmStore {
  constructor(private readonly settings: SettingsStore) {}

  /** Finds a VM in the location `storage` names, or in every location in order. */
  async find(name: string, storage?: string | null): Promise<VmRef> {
    for (const location of await this.settings.searchLocations(storage)) {
      const dir = join(location.path, name);
      if (await isInitialized(dir)) return { name, dir, location };
      if (storage && /[/\\]/.test(storage) && (await exists(dir))) {
        throw new HostError("failed", `Virtual machine not initialized: ${name}`);
      }
    }
    throw new HostError("not_found", `Virtual machine not found: ${name}`);
  }

  /** Every VM of one location, or of all; sorted by name as a person would (vm2 before vm10). */
  async list(storage?: string | null): Promise<VmRef[]> {
    const found: VmRef[] = [];
    for (const location of await this.settings.searchLocations(storage)) {
      const entries = await readdir(location.path, { withFileTypes: true }).catch((err) => {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
        throw new HostError("failed", `Cannot list ${location.path}: ${(err as Error).message}`);
      });
      const candidates = entries.filter((e) => e.isDirectory() && !e.name.startsWith("."));
      const checked = await Promise.all(
        candidates.map(async (e) => {
          const dir = join(location.path, e.name);
          return (await isInitialized(dir)) ? { name: e.name, dir, location } : undefined;
        }),
      );
      found.push(...(checked.filter(Boolean) as VmRef[]));
    }
    const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
    return found.sort((a, b) => collator.compare(a.name, b.name));
  }

  /** Creates a stopped VM: empty sparse disk, UEFI variables, config. Exactly one of two racing creates wins. */
  async create(name: string, location: Location, config: VmConfig): Promise<VmRef> {
    const target = join(location.path, name);
    await ensureWritableDirectory(location.path);
    if (await exists(target)) throw alreadyExists(name);
    return this.buildInPlace(location, target, name, async (temp) => {
      const disk = await open(join(temp, DISK_FILE), "wx");
      try {
        await disk.truncate(config.diskSize ?? 0);
      } finally {
        await disk.close();
      }
      const firmware = findFirmware();
      if (firmware) await copyFile(firmware.vars, join(temp, NVRAM_FILE));
      else await writeFile(join(temp, NVRAM_FILE), "");
      await writeVmConfig(temp, { ...config, macAddress: config.macAddress ?? randomMac() });
    }).catch((err) => {
      throw (err as NodeJS.ErrnoException).code === "ENOTEMPTY" ||
        (err as NodeJS.ErrnoException).code === "EEXIST"
        ? alreadyExists(name)
        : err;
    });
  }

  /** Copies a VM sparsely under a new name, with a new MAC address. */
  async clone(source: VmRef, newName: string, location: Location): Promise<VmRef> {
    const target = join(location.path, newName);
    await ensureWritableDirectory(location.path);
    await this.checkFree(target);
    return this.buildInPlace(location, target, newName, (temp) => copyVmFiles(source.dir, temp, true)).catch(
      (err) => {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === "ENOTEMPTY" || code === "EEXIST") {
          throw new HostError("failed", `Directory already exists at path: ${target}`);
        }
        throw err;
      },
    );
  }

  /** Moves a VM to another location: a rename on one file system, a sparse copy across two. */
  async move(vm: VmRef, location: Location): Promise<VmRef> {
    const target = join(location.path, vm.name);
    await ensureWritableDirectory(location.path);
    await this.checkFree(target);
    try {
      await rename(vm.dir, target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EXDEV") throw err;
      await this.buildInPlace(location, target, vm.name, (temp) => copyVmFiles(vm.dir, temp, false));
      await this.remove(vm);
    }
    return { name: vm.name, dir: target, location };
  }

  /** Deletes a VM: out of the list at once (renamed), then its files. */
  async remove(vm: VmRef) {
    const trash = await tempPath(vm.location.path);
    await rename(vm.dir, trash);
    await rm(trash, { recursive: true, force: true });
  }

  /** Builds a new VM with `build` in a temporary directory, then renames it into place. */
  async build(name: string, location: Location, build: (temp: string) => Promise<void>): Promise<VmRef> {
    const target = join(location.path, name);
    await ensureWritableDirectory(location.path);
    await this.checkFree(target);
    return this.buildInPlace(location, target, name, build).catch((err) => {
      const code = (err as NodeJS.ErrnoException).code;
      throw code === "ENOTEMPTY" || code === "EEXIST" ? alreadyExists(name) : err;
    });
  }

  /** Refuses a disk size below the disk's present size: shrinking is not supported. */
  async checkGrowth(vm: VmRef, bytes: number, config?: VmConfig) {
    const size =
      config?.diskFormat === "qcow2" ? (config.diskSize ?? 0) : (await stat(join(vm.dir, DISK_FILE))).size;
    if (bytes < size) {
      throw new HostError(
        "invalid_params",
        `Disk size can only grow: ${vm.name} has ${size} bytes, asked for ${bytes}. Shrinking a disk is not supported.`,
      );
    }
  }

  /** Grows the disk (a raw disk sparsely: no blocks are written; an overlay's virtual size); never shrinks it. */
  async growDisk(vm: VmRef, bytes: number, config?: VmConfig) {
    const path = join(vm.dir, DISK_FILE);
    if (config?.diskFormat === "qcow2") return resizeOverlay(path, bytes);
    if (bytes > (await stat(path)).size) await truncate(path, bytes);
  }

  /**
   * Makes the disk agree with the config's size where it can: a smaller disk grows to it; a disk
   * already larger (grown before its config was written) cannot shrink. Returns the disk's size.
   */
  async reconcileDisk(vm: VmRef, config: VmConfig): Promise<number> {
    // An overlay's size is in its header, set by qemu-img with the config: nothing to reconcile.
    if (config.diskFormat === "qcow2") return config.diskSize ?? 0;
    if (config.diskSize !== undefined) await this.growDisk(vm, config.diskSize);
    return (await stat(join(vm.dir, DISK_FILE))).size;
  }

  /** Throws lume's error when something already exists at `target`. */
  async checkFree(target: string) {
    if (await exists(target)) throw new HostError("failed", `Directory already exists at path: ${target}`);
  }

  async diskUsage(vm: VmRef, config?: VmConfig): Promise<DiskUsage> {
    const info = await stat(join(vm.dir, DISK_FILE)).catch(() => undefined);
    if (!info) return { allocated: 0, total: config?.diskSize ?? 0 };
    if (config?.diskFormat === "qcow2") return { allocated: info.blocks * 512, total: config.diskSize ?? 0 };
    return { allocated: info.blocks * 512, total: info.size };
  }

  /**
   * Removes temporary directories left by a service that was killed mid-way: those whose holder
   * lock is gone (older names carry a pid instead, alive only while that process runs).
   */
  async sweep() {
    for (const location of await this.settings.searchLocations()) await this.sweepDir(location.path);
  }

  /** Removes the temporary directories of gone processes in one directory (a location, a VM's snapshots). */
  async sweepDir(dir: string) {
    const own = await holderId();
    const entries = await readdir(dir).catch(() => [] as string[]);
    for (const entry of entries) {
      const holder = /^\.hangar-tmp-([0-9a-f]{16}|\d+)-/.exec(entry)?.[1];
      if (!holder || holder === own) continue;
      const alive = /^\d+$/.test(holder) ? processRunning(Number(holder)) : await holderAlive(holder);
      if (!alive) await rm(join(dir, entry), { recursive: true, force: true });
    }
  }

  /** Builds a VM in a temp dir of `location`, then renames it to `target`. */
  private async buildInPlace(
    location: Location,
    target: string,
    name: string,
    build: (temp: string) => Promise<void>,
  ): Promise<VmRef> {
    const temp = await tempPath(location.path);
    await mkdir(temp);
    try {
      await build(temp);
      await rename(temp, target);
    } catch (err) {
      await rm(temp, { recursive: true, force: true });
      throw err;
    }
    return { name, dir: target, location };
  }
}

/** Copies config, disk (sparsely) and UEFI variables; `newMac` gives the copy a MAC of its own. */
async function copyVmFiles(from: string, to: string, newMac: boolean) {
  const config = await readVmConfig(from);
  // A disk built on a snapshot is copied flattened (raw): the copy depends on no snapshot.
  const { diskFormat: _format, diskBacking: _backing, ...own } = config;
  // The config goes first: its fsync would otherwise wait for ext4 to flush the copied disk.
  await writeVmConfig(to, newMac ? { ...own, macAddress: randomMac() } : own);
  await copyFile(join(from, NVRAM_FILE), join(to, NVRAM_FILE));
  await copyDisk(from, config, join(to, DISK_FILE));
}

export function alreadyExists(name: string) {
  return new HostError("failed", `Virtual machine already exists with name: ${name}`);
}

export async function isInitialized(dir: string) {
  const present = await Promise.all(
    [CONFIG_FILE, DISK_FILE, NVRAM_FILE].map((file) => exists(join(dir, file))),
  );
  return present.every(Boolean);
}

async function exists(path: string) {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * A new hidden temporary path in `dir`, `.hangar-tmp-<holder id>-<random>`: the store lists no
 * hidden directory, and a later service sweeps it once this process is gone.
 */
export async function tempPath(dir: string, label = ""): Promise<string> {
  return join(dir, `${TEMP_PREFIX}${await holderId()}-${label}${randomBytes(6).toString("hex")}`);
}
