/**
 * The QEMU runtime: a desktop is a VM directory (the VM store) and, while it runs, a QEMU process
 * (the runner). It ties the store, the runner, the settings (locations) and the log together, and
 * knows nothing of HTTP.
 */
import { readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { writeFileAtomic } from "../../common/atomic-write.js";
import { settled } from "../../common/settled.js";
import { formatBytes, parseLumeSize } from "../../common/sizes.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { KeyedLock } from "../keyed-lock.js";
import { needsMacHost } from "../macos.js";
import { vmName } from "../names.js";
import type { CloneRequest, CreateRequest, RunRequest, StopRequest, UpdateRequest } from "../requests.js";
import { followFile } from "../runtimes/follow-file.js";
import type { DesktopRuntime, LogOptions, RuntimeRecord, StopOutcome } from "../runtimes/runtime.js";
import type { SettingsStore } from "../settings.js";
import { SshProbe } from "../ssh-probe.js";
import type { PushState, VmActivity } from "../vm-activity.js";
import {
  LAST_ERROR_FILE,
  parseDisplay,
  parseNetworkMode,
  readVmConfig,
  SERIAL_LOG,
  type VmConfig,
  writeVmConfig,
} from "../vm-config.js";
import { vmDetails } from "../vm-details.js";
import type { VmRef, VmStore } from "../vm-store.js";
import { completeSession, isIncomplete, startQemu, stopQemu } from "./runner.js";
import { liveSession, type Session } from "./session.js";

/** A QEMU VM's record: the runtime's, and `push` once the VM was pushed. */
export type QemuRecord = RuntimeRecord & { push?: PushState };

export interface QemuRuntimeOptions {
  /** How long `stop` waits for the guest to power down before quitting QEMU (default 10 s). */
  stopGraceMs?: number;
}

/** The smallest sizes a VM can be created with: below them QEMU and its firmware cannot boot. */
export const MIN_MEMORY_BYTES = 128 * 1024 ** 2;
export const MIN_DISK_BYTES = 64 * 1024 ** 2;

export class QemuRuntime implements DesktopRuntime {
  readonly kind = "qemu" as const;
  private readonly locks = new KeyedLock();
  /** VMs whose QEMU is being started, by directory. */
  private readonly starting = new Map<string, Promise<void>>();
  /** One launch at a time, so two VMs never pick the same loopback address. */
  private launchQueue: Promise<unknown> = Promise.resolve();
  private readonly ssh = new SshProbe();
  private readonly listeners: ((name: string) => void)[] = [];

  constructor(
    private readonly settings: SettingsStore,
    readonly store: VmStore,
    private readonly log: HostLog,
    private readonly activity: VmActivity,
    private readonly options: QemuRuntimeOptions = {},
  ) {}

  async list(storage?: string): Promise<QemuRecord[]> {
    const vms = await this.store.list(storage);
    const details = await Promise.all(vms.map((vm) => this.details(vm).catch(() => undefined)));
    return details.filter((d): d is QemuRecord => d !== undefined);
  }

  /**
   * Puts right what a killed service left: temporary directories, disks whose size disagrees with
   * their config.json (the config is the record of intent), and sessions of running VMs that were
   * written before QEMU told its pid and VNC port. Called once at start-up.
   */
  async recover() {
    await this.store.sweep();
    for (const vm of await this.store.list()) {
      await this.locks.run(vm.dir, async () => {
        const config = await readVmConfig(vm.dir).catch(() => undefined);
        if (!config) return;
        const diskSize = await this.store.reconcileDisk(vm, config);
        if (diskSize !== config.diskSize) await writeVmConfig(vm.dir, { ...config, diskSize });
        await this.completedSession(vm);
      });
    }
  }

  /** A VM's record, or undefined when no VM directory of that name exists. */
  async find(name: string, storage?: string): Promise<QemuRecord | undefined> {
    await this.settings.searchLocations(storage); // an unknown location is an error of its own
    const vm = await this.store.find(name, storage).catch((err) => {
      if (err instanceof HostError && err.kind === "not_found") return undefined;
      throw err;
    });
    if (!vm) return undefined;
    return await this.details(vm).catch(() => {
      throw new HostError(
        "not_found",
        `Virtual machine not found: ${vm.name} (its config.json is unreadable)`,
      );
    });
  }

  async create(request: CreateRequest) {
    const name = vmName(request.name);
    const memorySize = size(request.memory, "memory", MIN_MEMORY_BYTES);
    const diskSize = size(request.diskSize, "diskSize", MIN_DISK_BYTES);
    parseDisplay(request.display);
    positiveCpu(request.cpu);
    const networkMode = parseNetworkMode(request.network ?? "nat");
    natOnly(networkMode);
    const os = request.os.toLowerCase();
    if (os === "macos" || os === "darwin") throw needsMacHost("Creating a macOS VM");
    if (os !== "linux")
      throw new HostError("invalid_params", `Unsupported OS type: ${request.os} (expected linux or macOS)`);
    if (request.ipsw !== undefined) throw needsMacHost("An IPSW restore image (ipsw)");
    const location = await this.settings.location(request.storage);
    const config: VmConfig = {
      os: "linux",
      cpuCount: request.cpu,
      memorySize,
      diskSize,
      display: request.display,
      networkMode,
    };
    await this.locks.run(join(location.path, name), () => this.store.create(name, location, config));
    this.announce(name);
    await this.log.info("VM created", {
      vm: name,
      location: location.name,
      diskSize,
      memorySize,
      cpu: request.cpu,
    });
  }

  async remove(name: string, storage?: string) {
    const vm = await this.store.find(vmName(name), storage);
    await this.locks.run(vm.dir, async () => {
      this.activity.assertIdle(vm, "delete");
      await this.starting.get(vm.dir);
      // Its disk goes with it: there is nothing for the guest to save, so no power-down grace.
      const session = await liveSession(vm.dir);
      if (session) await stopQemu(vm.dir, session, 0);
      await this.store.remove(vm);
    });
    this.changed(vm.name);
    await this.log.info("VM deleted", { vm: vm.name, location: vm.location.name });
  }

  async clone(request: CloneRequest) {
    const source = await this.store.find(vmName(request.name), request.sourceLocation);
    const newName = vmName(request.newName);
    const location = await this.settings.location(request.destLocation);
    const target = join(location.path, newName);
    if (target === source.dir) {
      throw new HostError(
        "invalid_params",
        `Cannot clone ${source.name} onto itself: choose another newName`,
      );
    }
    // Known at once when the target exists; the store checks again under both locks.
    await this.store.checkFree(target);
    const clone = await this.locks.run([source.dir, target], async () => {
      if (await this.isRunning(source)) throw alreadyRunning(source.name);
      return this.store.clone(source, newName, location);
    });
    this.announce(clone.name);
    await this.log.info("VM cloned", {
      source: source.name,
      destination: clone.name,
      location: location.name,
    });
  }

  async update(name: string, request: UpdateRequest) {
    const wanted = vmName(name);
    // `storage` names where the VM should be: found there, it stays; found elsewhere, it moves.
    const vm = await this.store
      .find(wanted, request.storage)
      .catch(() => (request.storage ? this.store.find(wanted) : Promise.reject(notFound(wanted))));
    if (request.cpu !== undefined) positiveCpu(request.cpu);
    const memorySize =
      request.memory === undefined ? undefined : size(request.memory, "memory", MIN_MEMORY_BYTES);
    const diskSize =
      request.diskSize === undefined ? undefined : size(request.diskSize, "diskSize", MIN_DISK_BYTES);
    if (request.display !== undefined) parseDisplay(request.display);
    const destination = request.storage ? await this.settings.location(request.storage) : undefined;
    const moving = destination !== undefined && destination.path !== vm.location.path;

    const keys = moving ? [vm.dir, join(destination.path, vm.name)] : [vm.dir];
    await this.locks.run(keys, async () => {
      this.activity.assertIdle(vm, "modify");
      const running = await this.isRunning(vm);
      if (running && diskSize !== undefined) {
        throw new HostError("failed", `Cannot modify ${vm.name}: the VM is running. Stop it first.`);
      }
      if (running && (request.cpu !== undefined || memorySize !== undefined || request.display || moving)) {
        throw alreadyRunning(vm.name);
      }
      const config = await readVmConfig(vm.dir);
      if (diskSize !== undefined) await this.store.checkGrowth(vm, diskSize);
      const changed: VmConfig = {
        ...config,
        ...(request.cpu !== undefined && { cpuCount: request.cpu }),
        ...(memorySize !== undefined && { memorySize }),
        ...(diskSize !== undefined && { diskSize }),
        ...(request.display !== undefined && { display: request.display }),
      };
      // The config first: it is the record of intent that start-up reconciles the disk with.
      await writeVmConfig(vm.dir, changed);
      if (diskSize !== undefined) await this.store.growDisk(vm, diskSize);
      if (moving) await this.store.move(vm, destination);
    });
    await this.log.info("VM settings updated", {
      vm: vm.name,
      cpu: request.cpu,
      memorySize,
      diskSize,
      display: request.display,
      location: moving ? destination.name : undefined,
    });
  }

  /** Checks what can be checked at once, then starts QEMU in the background. */
  async run(name: string, request: RunRequest): Promise<void> {
    if (request.recoveryMode) throw needsMacHost("Recovery mode (recoveryMode)");
    if (request.vnc === "disabled" && !request.noDisplay) {
      throw new HostError(
        "invalid_params",
        "VNC is disabled for this run, so '--display vnc' cannot be used.",
      );
    }
    if (request.network !== undefined) natOnly(parseNetworkMode(request.network));
    const shares = request.sharedDirectories ?? [];
    for (const share of shares) {
      const info = await stat(share.hostPath).catch(() => undefined);
      if (!share.hostPath.startsWith("/") || !info?.isDirectory()) {
        throw new HostError(
          "invalid_params",
          `Host path does not exist or is not a directory: ${share.hostPath} (an absolute path is needed)`,
        );
      }
    }
    const vm = await this.store.find(vmName(name), request.storage);
    const config = await readVmConfig(vm.dir);
    if (config.os.toLowerCase() !== "linux") throw needsMacHost(`Running a ${config.os} VM`);
    natOnly(parseNetworkMode(config.networkMode ?? "nat"));

    await this.locks.run(vm.dir, async () => {
      this.activity.assertIdle(vm, "run");
      if (await this.isRunning(vm)) throw alreadyRunning(vm.name);
      const started = this.launch(vm, config, {
        // The spec: VNC on loopback with a password unless noDisplay (or lume's vnc: "disabled").
        vnc: !request.noDisplay && request.vnc !== "disabled",
        sharedDirectories: shares.map((s) => ({ hostPath: s.hostPath, readOnly: s.readOnly ?? false })),
      });
      this.starting.set(vm.dir, started);
      void started.finally(() => {
        this.starting.delete(vm.dir);
        this.changed(vm.name);
      });
    });
    this.changed(vm.name);
  }

  /**
   * Stops a VM and resolves once its QEMU has ended. The guest gets the grace to power down
   * (none with `force`, or when its disk was never written: there is no system to shut down);
   * the outcome says whether it did or QEMU was quit.
   */
  async stop(name: string, request: StopRequest = {}): Promise<StopOutcome> {
    const vm = await this.store.find(vmName(name), request.storage);
    const outcome = await this.locks.run(vm.dir, async () => {
      await this.starting.get(vm.dir);
      const session = await liveSession(vm.dir);
      if (!session) throw new HostError("failed", `Virtual machine not running: ${vm.name}`);
      const blank = (await this.store.diskUsage(vm)).allocated === 0;
      const grace =
        request.force || blank
          ? 0
          : request.graceSeconds !== undefined
            ? request.graceSeconds * 1000
            : (this.options.stopGraceMs ?? 10_000);
      return stopQemu(vm.dir, session, grace);
    });
    this.changed(vm.name);
    await this.log.info("VM stopped", { vm: vm.name, outcome });
    return outcome;
  }

  /** The VM's serial console (`serial.log`), as QEMU writes it while the VM runs. */
  async logs(name: string, options: LogOptions): Promise<Readable> {
    const vm = await this.store.find(vmName(name));
    return followFile(join(vm.dir, SERIAL_LOG), options);
  }

  /** Waits for every start in progress (tests and shutdown). */
  async settled() {
    await Promise.all([...this.starting.values()]);
  }

  async close() {
    await this.settled();
  }

  onChange(listener: (name: string) => void) {
    this.listeners.push(listener);
  }

  private changed(name: string) {
    for (const listener of this.listeners) listener(name);
  }

  private async launch(
    vm: VmRef,
    config: VmConfig,
    choice: { vnc: boolean; sharedDirectories: { hostPath: string; readOnly: boolean }[] },
  ) {
    const launched = this.launchQueue.then(async () => {
      const takenAddresses = await this.takenAddresses();
      return startQemu({ name: vm.name, dir: vm.dir, config, takenAddresses, ...choice });
    });
    this.launchQueue = settled(launched);
    try {
      const session = await launched;
      await rm(join(vm.dir, LAST_ERROR_FILE), { force: true });
      await this.log.info("VM started", {
        vm: vm.name,
        pid: session.pid,
        accelerator: session.accelerator,
        ipAddress: session.ipAddress,
        vncPort: session.vnc?.port ?? undefined,
      });
    } catch (err) {
      const message = (err as Error).message;
      await writeFileAtomic(join(vm.dir, LAST_ERROR_FILE), `${new Date().toISOString()} ${message}\n`).catch(
        () => undefined,
      );
      await this.log.error("VM failed to start", { vm: vm.name, error: message });
    }
  }

  private async takenAddresses(): Promise<Set<string>> {
    const vms = await this.store.list();
    const sessions = await Promise.all(vms.map((vm) => liveSession(vm.dir)));
    return new Set(sessions.map((s) => s?.ipAddress).filter((ip): ip is string => Boolean(ip)));
  }

  private announce(name: string) {
    this.activity.record(name);
  }

  /** The live session of a VM, completed first when a killed service left it half-written. */
  private async completedSession(vm: VmRef): Promise<Session | undefined> {
    const session = await liveSession(vm.dir);
    if (!session || !isIncomplete(session) || this.starting.has(vm.dir)) return session;
    return completeSession(vm.dir, session).catch(async (err) => {
      await this.log.error("Cannot complete the session of a running VM", {
        vm: vm.name,
        error: (err as Error).message,
      });
      return session;
    });
  }

  /** True while the VM's QEMU lives or is being started. */
  async isRunning(vm: VmRef) {
    return this.starting.has(vm.dir) || (await liveSession(vm.dir)) !== undefined;
  }

  private async details(vm: VmRef): Promise<QemuRecord> {
    const config = await readVmConfig(vm.dir);
    const starting = this.starting.has(vm.dir);
    const session = starting ? undefined : await this.completedSession(vm);
    const lastError = await readFile(join(vm.dir, LAST_ERROR_FILE), "utf8").then(
      (text) => text.trim(),
      () => null,
    );
    const details = vmDetails(vm, config, await this.store.diskUsage(vm, config), {
      starting,
      session,
      lastError: session || starting ? null : lastError,
      ssh: this.ssh,
    });
    const record: QemuRecord = {
      ...details,
      runtime: "qemu",
      startedAt: session?.startedAt || null,
    };
    const push = this.activity.push(vm);
    return push ? { ...record, push } : record;
  }
}

function size(text: string, field: string, minimum: number): number {
  let bytes: number;
  try {
    bytes = parseLumeSize(text);
  } catch (err) {
    throw new HostError("invalid_params", (err as Error).message);
  }
  if (bytes < minimum) {
    throw new HostError(
      "invalid_params",
      `Invalid ${field} '${text}': at least ${formatBytes(minimum)} is needed`,
    );
  }
  return bytes;
}

function positiveCpu(cpu: number) {
  if (!Number.isInteger(cpu) || cpu < 1 || cpu > 1024) {
    throw new HostError(
      "invalid_params",
      `Invalid cpu count: ${cpu} (expected a whole number from 1 to 1024)`,
    );
  }
}

function natOnly(mode: string) {
  if (mode !== "nat") {
    throw new HostError(
      "not_supported",
      `Network mode '${mode}' is not supported by the QEMU backend yet: use 'nat' (user-mode networking with forwarded ports)`,
    );
  }
}

function alreadyRunning(name: string) {
  return new HostError("failed", `Virtual machine already running: ${name}`);
}

function notFound(name: string) {
  return new HostError("not_found", `Virtual machine not found: ${name}`);
}
