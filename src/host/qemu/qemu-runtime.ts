/**
 * The QEMU runtime: a desktop is a VM directory (the VM store) and, while it runs, a QEMU process
 * (the runner). It ties the store, the runner, the settings (locations) and the log together, and
 * knows nothing of HTTP.
 */
import { copyFile, link, mkdir, readFile, rename, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { flushFile, writeFileAtomic } from "../../common/atomic-write.js";
import { settled } from "../../common/settled.js";
import { followFile } from "../desktops/follow-file.js";
import type { HibernationMode } from "../desktops/hibernation.js";
import { parseDisplay, positiveCpu, size } from "../desktops/limits.js";
import { needsMacHost } from "../desktops/macos.js";
import type {
  HibernatingRuntime,
  LogOptions,
  RuntimeRecord,
  SnapshotRecord,
  StopOutcome,
  WakeAddress,
} from "../desktops/runtime.js";
import type { EgressService } from "../egress/egress-service.js";
import { networkModeOf, policyOf } from "../egress/policy.js";
import { QemuCage } from "../egress/qemu-cage.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import type { PushState, VmActivity } from "../images/vm-activity.js";
import { KeyedLock } from "../keyed-lock.js";
import { snapshotName, vmName } from "../names.js";
import type { CloneRequest, CreateRequest, RunRequest, StopRequest, UpdateRequest } from "../requests.js";
import type { SettingsStore } from "../settings.js";
import { copyDisk, createOverlay } from "./disk.js";
import {
  clearIntent,
  completeBuild,
  consume,
  discard,
  dropStale,
  type Hibernation,
  installBuild,
  newBuildDir,
  readBuild,
  readHibernation,
  readIntent,
  recordOf,
  writeIntent,
} from "./hibernation.js";
import { loopbackNetworkProblem } from "./loopback.js";
import { saveState } from "./migration.js";
import { QmpClient } from "./qmp.js";
import { writeRamFile } from "./ram-file.js";
import {
  completeSession,
  isIncomplete,
  type RestoreFrom,
  resumeFrom,
  startQemu,
  stopQemu,
} from "./runner.js";
import { liveSession, qmpSocketPath, type Session } from "./session.js";
import {
  checkRoom,
  listSnapshots,
  MEMORY_FILE,
  publicRecord,
  readSnapshot,
  removeSnapshotDir,
  type Snapshot,
  STATE_FILE,
  snapshotsDir,
  writeRecord,
} from "./snapshots.js";
import { copySparse } from "./sparse-copy.js";
import { SshProbe } from "./ssh-probe.js";
import {
  DISK_FILE,
  LAST_ERROR_FILE,
  NVRAM_FILE,
  parseNetworkMode,
  RESTORE_JOURNAL_FILE,
  readVmConfig,
  SERIAL_LOG,
  SNAPSHOT_MARK_FILE,
  type VmConfig,
  writeVmConfig,
} from "./vm-config.js";
import { vmDetails } from "./vm-details.js";
import { tempPath, type VmRef, type VmStore } from "./vm-store.js";

/**
 * A QEMU VM's record: the runtime's, `push` once the VM was pushed, and while it runs the id its
 * guest was given at launch (`bootId`) and the snapshot it was restored or forked from.
 */
export type QemuRecord = RuntimeRecord & {
  push?: PushState;
  bootId?: string;
  restoredFrom?: { vm: string; snapshot: string };
};

/** The longest saving a running VM's state may take (its RAM goes in the stream when not a file). */
const SAVE_TIMEOUT_MS = 300_000;

export interface QemuRuntimeOptions {
  /** How long `stop` waits for the guest to power down before quitting QEMU (default 10 s). */
  stopGraceMs?: number;
  /**
   * The loopback addresses VMs get: `127.A.B` for `127.A.B.2`–`127.A.B.254` (default `127.0.1`).
   * Two host services on one machine each given their own never answer for each other's VMs.
   */
  loopbackNetwork?: string;
}

/** The smallest sizes a VM can be created with: below them QEMU and its firmware cannot boot. */
export const MIN_MEMORY_BYTES = 128 * 1024 ** 2;
export const MIN_DISK_BYTES = 64 * 1024 ** 2;

export class QemuRuntime implements HibernatingRuntime {
  readonly kind = "qemu" as const;
  /** A VM hibernates with its memory: RAM and devices to disk, QEMU ends (hibernation.ts). */
  readonly hibernation = { modes: ["memory"] } as const;
  /** A snapshot of a running VM keeps its whole state (RAM, devices, disk): snapshots.ts. */
  readonly snapshots = { running: "memory" } as const;
  /** A record is read from the VM's directory and the readiness kept in memory. */
  readonly localRecords = true;
  private readonly locks = new KeyedLock();
  /** VMs whose QEMU is being started, by directory. */
  private readonly starting = new Map<string, Promise<void>>();
  /** One launch at a time, so two VMs never pick the same loopback address. */
  private launchQueue: Promise<unknown> = Promise.resolve();
  private readonly ssh = new SshProbe();
  private readonly listeners: ((name: string) => void)[] = [];
  /** Cages VMs made with a network policy (egress/qemu-cage.ts); without: a policy is a 400. */
  private readonly cage?: QemuCage;

  constructor(
    private readonly settings: SettingsStore,
    readonly store: VmStore,
    private readonly log: HostLog,
    private readonly activity: VmActivity,
    private readonly options: QemuRuntimeOptions = {},
    egress?: EgressService,
  ) {
    const network = options.loopbackNetwork;
    const problem = network && loopbackNetworkProblem(network);
    if (problem) throw new HostError("invalid_params", `Invalid loopback network '${network}': ${problem}`);
    if (egress) this.cage = new QemuCage(egress, log);
  }

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
        await this.store.sweepDir(snapshotsDir(vm));
        await this.settleHibernation(vm);
        await this.store.sweepDir(vm.dir);
        await this.finishInterrupted(vm);
        await this.completedSession(vm);
        if (await liveSession(vm.dir)) await this.cage?.recover(vm.name, vm.dir);
      });
    }
  }

  /**
   * What a killed service left mid-way: a VM paused for a snapshot runs again; a restore or fork
   * whose QEMU may be waiting for its state is stopped, with the snapshot's disk (the disk part is
   * done again: it is idempotent), and says so in `lastError`.
   */
  private async finishInterrupted(vm: VmRef) {
    const session = await liveSession(vm.dir);
    if (await exists(join(vm.dir, SNAPSHOT_MARK_FILE))) {
      if (session) {
        const qmp = await QmpClient.connect(session.qmpSocket).catch(() => undefined);
        await qmp?.execute("cont").catch(() => undefined);
        qmp?.close();
      }
      await rm(join(vm.dir, SNAPSHOT_MARK_FILE), { force: true });
    }
    const journal = await readFile(join(vm.dir, RESTORE_JOURNAL_FILE), "utf8")
      .then((text) => JSON.parse(text) as { snapshotDir: string; vm: string; snapshot: string })
      .catch(() => undefined);
    if (!journal) return;
    if (session) await stopQemu(vm.dir, session, 0);
    const source = await this.store.find(journal.vm).catch(() => undefined);
    const snapshot = source && (await readSnapshot(source, journal.snapshot));
    if (snapshot) await this.useSnapshotDisk(vm.dir, snapshot);
    await writeFileAtomic(
      join(vm.dir, LAST_ERROR_FILE),
      `${new Date().toISOString()} The start from snapshot ${journal.vm}/${journal.snapshot} was interrupted (the host service stopped): the VM has the snapshot's disk and is stopped\n`,
    );
    await rm(join(vm.dir, RESTORE_JOURNAL_FILE), { force: true });
    await this.log.error("An interrupted restore left the VM stopped", {
      vm: vm.name,
      snapshot: journal.snapshot,
    });
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
    const policy = policyOf(request.network);
    if (policy) {
      if (!this.cage)
        throw new HostError(
          "not_supported",
          "Network policies are not enforced for QEMU desktops on this host",
        );
      this.cage.check(policy);
    }
    const networkMode = parseNetworkMode(networkModeOf(request.network) ?? "nat");
    natOnly(networkMode);
    const os = request.os.toLowerCase();
    if (os === "macos" || os === "darwin") throw needsMacHost("Creating a macOS VM");
    if (os !== "linux")
      throw new HostError("invalid_params", `Unsupported OS type: ${request.os} (expected linux or macOS)`);
    if (request.ipsw !== undefined) throw needsMacHost("An IPSW restore image (ipsw)");
    if (request.image !== undefined) {
      throw new HostError(
        "invalid_params",
        "A QEMU VM is not made from a container image: pull a VM image (POST /svc/pull), or create it with runtime 'container'",
      );
    }
    const location = await this.settings.location(request.storage);
    const config: VmConfig = {
      os: "linux",
      cpuCount: request.cpu,
      memorySize,
      diskSize,
      display: request.display,
      networkMode,
    };
    await this.locks.run(join(location.path, name), async () => {
      await this.store.create(name, location, config);
      if (policy) await this.cage?.remember(name, policy);
    });
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
      const snapshots = await listSnapshots(vm);
      const users = (await this.snapshotUsers(snapshots.map((s) => s.dir))).filter((u) => u !== vm.name);
      if (users.length > 0) {
        throw new HostError(
          "failed",
          `Cannot delete ${vm.name}: the disks of ${users.join(", ")} are built on its snapshots. Delete those VMs first.`,
        );
      }
      // Its disk goes with it: there is nothing for the guest to save, so no power-down grace.
      const session = await liveSession(vm.dir);
      if (session) await stopQemu(vm.dir, session, 0);
      await this.store.remove(vm);
      await this.cage?.remove(vm.name, vm.dir);
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
      const made = await this.store.clone(source, newName, location);
      await this.cage?.copy(source.name, made.name);
      return made;
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
      if (await readHibernation(vm)) throw hibernatedConflict(vm.name, "modified");
      const running = await this.isRunning(vm);
      if (running && diskSize !== undefined) {
        throw new HostError("failed", `Cannot modify ${vm.name}: the VM is running. Stop it first.`);
      }
      if (running && (request.cpu !== undefined || memorySize !== undefined || request.display || moving)) {
        throw alreadyRunning(vm.name);
      }
      const config = await readVmConfig(vm.dir);
      if (moving && (await listSnapshots(vm)).length > 0) {
        throw new HostError(
          "failed",
          `Cannot move ${vm.name}: it has snapshots, and disks are built on them where they are. Clone it to the other location instead (a clone takes no snapshots).`,
        );
      }
      if (diskSize !== undefined) await this.store.checkGrowth(vm, diskSize, config);
      const changed: VmConfig = {
        ...config,
        ...(request.cpu !== undefined && { cpuCount: request.cpu }),
        ...(memorySize !== undefined && { memorySize }),
        ...(diskSize !== undefined && { diskSize }),
        ...(request.display !== undefined && { display: request.display }),
      };
      // The config first: it is the record of intent that start-up reconciles the disk with.
      await writeVmConfig(vm.dir, changed);
      if (diskSize !== undefined) await this.store.growDisk(vm, diskSize, changed);
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
      if (await readHibernation(vm)) throw hibernatedConflict(vm.name, "booted");
      await dropStale(vm, false);
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
      if (!session && (await readHibernation(vm))) {
        // Stopping a sleeping VM gives up its saved state: it is stopped, its disk as it was.
        await discard(vm);
        return "quit" as const;
      }
      if (!session) throw new HostError("failed", `Virtual machine not running: ${vm.name}`);
      const blank = (await this.store.diskUsage(vm)).allocated === 0;
      const grace =
        request.force || blank
          ? 0
          : request.graceSeconds !== undefined
            ? request.graceSeconds * 1000
            : (this.options.stopGraceMs ?? 10_000);
      const stopped = await stopQemu(vm.dir, session, grace);
      await dropStale(vm, false);
      return stopped;
    });
    this.changed(vm.name);
    await this.log.info("VM stopped", { vm: vm.name, outcome });
    return outcome;
  }

  /**
   * A snapshot of the VM: of a running VM its whole state (paused meanwhile: its devices' state,
   * its RAM, its disk, then it runs on); of a stopped VM its disk. Built aside, renamed into place.
   */
  async snapshot(name: string, snapshot: string): Promise<SnapshotRecord> {
    const vm = await this.store.find(vmName(name));
    const snap = snapshotName(snapshot);
    const made = await this.locks.run(vm.dir, async () => {
      this.activity.assertIdle(vm, "snapshot");
      await this.starting.get(vm.dir);
      const dir = join(snapshotsDir(vm), snap);
      if (await exists(dir)) throw new HostError("failed", `Snapshot already exists: ${vm.name}/${snap}`);
      const config = await readVmConfig(vm.dir);
      const session = await liveSession(vm.dir);
      await mkdir(snapshotsDir(vm), { recursive: true });
      const disk = await this.store.diskUsage(vm, config);
      const ramBytes = session ? (config.memorySize ?? 0) : 0;
      await checkRoom(snapshotsDir(vm), disk.allocated + ramBytes, `snapshot ${snap} of ${vm.name}`);
      const temp = await tempPath(snapshotsDir(vm));
      await mkdir(temp);
      let qmp: QmpClient | undefined;
      const started = Date.now();
      try {
        if (session) {
          await writeFileAtomic(join(vm.dir, SNAPSHOT_MARK_FILE), `${snap}\n`);
          qmp = await QmpClient.connect(session.qmpSocket);
          await qmp.execute("stop");
          await saveState(qmp, join(temp, STATE_FILE), SAVE_TIMEOUT_MS);
          if (session.ram?.shared) await copySparse(session.ram.path, join(temp, MEMORY_FILE));
        }
        await copyDisk(vm.dir, config, join(temp, DISK_FILE));
        await copyFile(join(vm.dir, NVRAM_FILE), join(temp, NVRAM_FILE));
        // The desktop runs on while the copies reach the disk, before the record says they are
        // whole: a snapshot survives a crash of the machine, and its first restore does not wait
        // behind their write-back (0.6 s more for a 2 GB desktop here, docs/performance.md).
        await qmp?.execute("cont");
        for (const file of [STATE_FILE, MEMORY_FILE, DISK_FILE, NVRAM_FILE])
          await flushFile(join(temp, file));
        const createdAt = new Date().toISOString();
        await writeRecord(temp, {
          name: snap,
          vm: vm.name,
          createdAt,
          memory: session !== undefined,
          config,
        });
        await rename(temp, dir);
      } catch (err) {
        await rm(temp, { recursive: true, force: true });
        throw snapshotFailure(err, vm.name, snap, session !== undefined);
      } finally {
        await qmp?.execute("cont").catch(() => undefined);
        qmp?.close();
        await rm(join(vm.dir, SNAPSHOT_MARK_FILE), { force: true });
      }
      const found = await readSnapshot(vm, snap);
      if (!found) throw new HostError("failed", `Snapshot ${vm.name}/${snap} vanished as it was made`);
      await this.log.info("Snapshot taken", {
        vm: vm.name,
        snapshot: snap,
        memory: found.memory,
        bytes: found.bytes,
        ms: Date.now() - started,
      });
      return publicRecord(found);
    });
    return made;
  }

  async listSnapshots(name: string): Promise<SnapshotRecord[]> {
    const vm = await this.store.find(vmName(name));
    return (await listSnapshots(vm)).map(publicRecord);
  }

  /** Deletes a snapshot; a clear 400 naming the VMs whose disks are built on it. */
  async deleteSnapshot(name: string, snapshot: string) {
    const vm = await this.store.find(vmName(name));
    const snap = snapshotName(snapshot);
    await this.locks.run(vm.dir, async () => {
      const found = await this.findSnapshot(vm, snap);
      const users = await this.snapshotUsers([found.dir]);
      if (users.length > 0) {
        throw new HostError(
          "failed",
          `Snapshot ${vm.name}/${snap} is in use: the disks of ${users.join(", ")} are built on it. ` +
            "Delete those VMs (or restore them to another snapshot) first.",
        );
      }
      await removeSnapshotDir(found.dir, await tempPath(snapshotsDir(vm)));
    });
    await this.log.info("Snapshot deleted", { vm: vm.name, snapshot: snap });
  }

  /**
   * Puts the VM back in the snapshot's state: its QEMU (if any) is quit, its disk becomes a new
   * overlay on the snapshot's disk, and with a memory snapshot a new QEMU resumes the snapshot's
   * RAM and devices. Resolves once that QEMU runs. Two restores of one VM run one after the other.
   */
  async restore(name: string, snapshot: string) {
    const vm = await this.store.find(vmName(name));
    const snap = snapshotName(snapshot);
    const started = Date.now();
    await this.locks.run(vm.dir, async () => {
      this.activity.assertIdle(vm, "restore");
      await this.starting.get(vm.dir);
      const found = await this.findSnapshot(vm, snap);
      await this.writeJournal(vm.dir, found);
      let replaced: string | undefined;
      try {
        const session = await liveSession(vm.dir);
        if (session) await stopQemu(vm.dir, session, 0);
        // A saved state of the VM (hibernated, or a resumed VM's RAM file) is the old state's.
        await discard(vm);
        this.changed(vm.name);
        // The disk it had is freed once the VM runs: dropping a large disk's blocks (a booted VM's
        // raw disk) took 0.2 s on the way of its first restore. A second name keeps it until then
        // (or a failure); a killed service's is swept at the next start.
        replaced = await keepAside(join(vm.dir, DISK_FILE), await tempPath(vm.dir, "replaced-disk-"));
        const config = await this.useSnapshotDisk(vm.dir, found);
        if (found.memory) await this.startFrom(vm, config, fromSnapshot(found));
      } finally {
        await rm(join(vm.dir, RESTORE_JOURNAL_FILE), { force: true });
        if (replaced) void rm(replaced, { force: true }).catch(() => undefined);
      }
    });
    this.changed(vm.name);
    await this.log.info("VM restored", { vm: vm.name, snapshot: snap, ms: Date.now() - started });
  }

  /**
   * New VMs from a snapshot, beside its VM: each with its own overlay disk on the snapshot's disk,
   * its own loopback address and ports, and (memory snapshot) the snapshot's RAM file mapped
   * privately, so that pages no fork wrote are shared. All or nothing: a fork that cannot be made
   * or started takes the others with it.
   */
  async fork(name: string, snapshot: string, names: string[]) {
    const vm = await this.store.find(vmName(name));
    const snap = snapshotName(snapshot);
    const forks = names.map((n) => vmName(n));
    const targets = forks.map((n) => join(vm.location.path, n));
    for (const target of targets) await this.store.checkFree(target);
    const started = Date.now();
    await this.locks.run([vm.dir, ...targets], async () => {
      const found = await this.findSnapshot(vm, snap);
      const made: VmRef[] = [];
      try {
        for (const fork of forks) {
          made.push(
            await this.store.build(fork, vm.location, async (temp) => {
              await copyFile(join(found.dir, NVRAM_FILE), join(temp, NVRAM_FILE));
              if (found.memory) await this.writeJournal(temp, found);
              await this.useSnapshotDisk(temp, found);
            }),
          );
          this.announce(fork);
        }
        if (found.memory) {
          const config = await readVmConfig(made[0]?.dir ?? "");
          await Promise.all(
            made.map(async (ref) => {
              try {
                await this.startFrom(ref, config, fromSnapshot(found));
              } finally {
                await rm(join(ref.dir, RESTORE_JOURNAL_FILE), { force: true });
              }
            }),
          );
        }
      } catch (err) {
        for (const ref of made) {
          const session = await liveSession(ref.dir);
          if (session) await stopQemu(ref.dir, session, 0);
          await this.store.remove(ref).catch(() => undefined);
          this.changed(ref.name);
        }
        throw err;
      }
    });
    for (const fork of forks) this.changed(fork);
    await this.log.info("VM forked", {
      vm: vm.name,
      snapshot: snap,
      forks: forks.join(","),
      ms: Date.now() - started,
    });
  }

  private async findSnapshot(vm: VmRef, snap: string): Promise<Snapshot> {
    const found = await readSnapshot(vm, snap);
    if (!found) throw new HostError("not_found", `Snapshot not found: ${vm.name}/${snap}`);
    return found;
  }

  private writeJournal(dir: string, snapshot: Snapshot) {
    const journal = { vm: snapshot.vm, snapshot: snapshot.name, snapshotDir: snapshot.dir };
    return writeFileAtomic(join(dir, RESTORE_JOURNAL_FILE), `${JSON.stringify(journal)}\n`);
  }

  /**
   * Makes the VM in `dir` the snapshot's: its config (devices as they were), and a new overlay
   * disk on the snapshot's disk, renamed over `disk.img`. Done again after a kill, to the same end.
   */
  private async useSnapshotDisk(dir: string, snapshot: Snapshot): Promise<VmConfig> {
    const size = snapshot.config.diskSize ?? (await stat(snapshot.disk)).size;
    const next = join(dir, `${DISK_FILE}.restore`);
    await createOverlay(next, snapshot.disk, size);
    await rename(next, join(dir, DISK_FILE));
    const config: VmConfig = {
      ...snapshot.config,
      diskSize: size,
      diskFormat: "qcow2",
      diskBacking: snapshot.disk,
    };
    await writeVmConfig(dir, config);
    return config;
  }

  /**
   * Starts the VM's QEMU from a saved state (a snapshot's, or its own hibernation's with `keep`:
   * its address, ports and VNC) and waits until it runs; a failure is the VM's lastError.
   */
  private async startFrom(vm: VmRef, config: VmConfig, restore: RestoreFrom, keep?: Hibernation) {
    const asked = performance.now();
    let launching = 0;
    let loading = 0;
    const launched = this.launchQueue.then(async () => {
      launching = performance.now();
      return startQemu({
        name: vm.name,
        dir: vm.dir,
        config,
        takenAddresses: await this.takenAddresses(vm),
        loopbackNetwork: this.options.loopbackNetwork,
        vnc: keep ? keep.vnc !== null : true,
        sharedDirectories: [],
        restore,
        keep,
        netdev: await this.cage?.netdevOptions(vm.name, vm.dir),
        fwCfg: await this.cage?.firmwareConfig(vm.name),
      });
    });
    this.launchQueue = settled(launched);
    const running = launched.then((session) => {
      loading = performance.now();
      return resumeFrom(vm.dir, session, restore);
    });
    this.starting.set(vm.dir, settled(running));
    try {
      await running;
      await rm(join(vm.dir, LAST_ERROR_FILE), { force: true });
      // Where a start from a snapshot spends its time: waiting for the launches before it (one at
      // a time), QEMU's launch, loading the state.
      await this.log.info(keep ? "VM resumed" : "VM started from a snapshot", {
        vm: vm.name,
        waitMs: Math.round(launching - asked),
        launchMs: Math.round(loading - launching),
        loadMs: Math.round(performance.now() - loading),
      });
    } catch (err) {
      const what = keep ? "resume" : `start ${vm.name} from snapshot ${restore.vm}/${restore.snapshot}`;
      const message = `Cannot ${keep ? `${what} ${vm.name}` : what}: ${(err as Error).message}`;
      await writeFileAtomic(join(vm.dir, LAST_ERROR_FILE), `${new Date().toISOString()} ${message}\n`).catch(
        () => undefined,
      );
      throw new HostError("failed", message);
    } finally {
      this.starting.delete(vm.dir);
      this.changed(vm.name);
    }
  }

  /** The VMs (any location) whose disks are overlays on a snapshot in one of `dirs`. */
  private async snapshotUsers(dirs: string[]): Promise<string[]> {
    if (dirs.length === 0) return [];
    const users: string[] = [];
    for (const ref of await this.store.list()) {
      const config = await readVmConfig(ref.dir).catch(() => undefined);
      const backing = config?.diskBacking;
      if (backing && dirs.some((dir) => backing.startsWith(`${dir}/`))) users.push(ref.name);
    }
    return users;
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
    await this.cage?.close();
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
      const netdev = await this.cage?.netdevOptions(vm.name, vm.dir);
      const fwCfg = await this.cage?.firmwareConfig(vm.name);
      return startQemu({
        name: vm.name,
        dir: vm.dir,
        config,
        takenAddresses,
        loopbackNetwork: this.options.loopbackNetwork,
        netdev,
        fwCfg,
        ...choice,
      });
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

  /** The loopback addresses running VMs hold, and those hibernated VMs keep for their resume. */
  private async takenAddresses(except?: VmRef): Promise<Set<string>> {
    const vms = (await this.store.list()).filter((vm) => vm.dir !== except?.dir);
    const held = await Promise.all(
      vms.map(async (vm) => (await liveSession(vm.dir))?.ipAddress ?? (await readHibernation(vm))?.ipAddress),
    );
    return new Set(held.filter((ip): ip is string => Boolean(ip)));
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

  // ---- hibernation (hibernation.ts) ----

  /**
   * Puts a running VM to sleep: paused, its device state and RAM written beside it (a full disk is
   * a clear error, and the VM runs on), then its QEMU ends. The VM keeps its address, ports and VNC.
   */
  async hibernate(name: string, mode: HibernationMode, asleep?: () => Promise<void>) {
    if (mode !== "memory") {
      throw new HostError("invalid_params", `A QEMU VM hibernates with its memory ('memory'), not '${mode}'`);
    }
    const vm = await this.store.find(vmName(name));
    const started = Date.now();
    const saved = await this.locks.run(vm.dir, async () => {
      this.activity.assertIdle(vm, "hibernate");
      await this.starting.get(vm.dir);
      const session = await liveSession(vm.dir);
      if (!session) {
        throw (await readHibernation(vm))
          ? new HostError("conflict", `${vm.name} is already hibernated`)
          : new HostError("conflict", `Cannot hibernate ${vm.name}: it is not running`);
      }
      if (session.sharedDirectories.length > 0) {
        throw new HostError(
          "conflict",
          `Cannot hibernate ${vm.name}: it runs with shared directories (virtio-9p), whose state QEMU cannot save. Stop it instead.`,
        );
      }
      const config = await readVmConfig(vm.dir);
      const ramBytes = session.ram?.shared
        ? await stat(session.ram.path).then((s) => s.blocks * 512)
        : (config.memorySize ?? 0);
      await checkRoom(vm.dir, ramBytes + 16 * 1024 ** 2, `hibernating ${vm.name} (the VM keeps running)`);
      const build = await newBuildDir(vm);
      await writeIntent(vm, { op: "hibernate", temp: build });
      let qmp: QmpClient | undefined;
      try {
        qmp = await QmpClient.connect(session.qmpSocket);
        await qmp.execute("stop");
        // RAM that is not a shared file goes into the stream, saved so that it can be loaded into one.
        const shared = session.ram?.shared === true;
        await saveState(qmp, join(build, STATE_FILE), SAVE_TIMEOUT_MS, shared);
        if (shared && session.ram) await copySparse(session.ram.path, join(build, MEMORY_FILE));
        await completeBuild(build, recordOf(session, config, shared));
        await installBuild(vm, build);
      } catch (err) {
        await rm(build, { recursive: true, force: true });
        await qmp?.execute("cont").catch(() => undefined);
        await clearIntent(vm);
        throw hibernateFailure(err, vm.name);
      } finally {
        qmp?.close();
      }
      // Saved and in place: from here on the VM is hibernated, whatever happens to this service.
      await stopQemu(vm.dir, session, 0);
      await clearIntent(vm);
      // Its ports are free: taken by the wake listeners now, not after the RAM file below.
      await asleep?.().catch(() => undefined);
      if (!session.ram?.shared) await this.giveRamFile(vm);
      return readHibernation(vm);
    });
    this.changed(vm.name);
    await this.log.info("VM hibernated", {
      vm: vm.name,
      bytes: saved?.bytes,
      ms: Date.now() - started,
    });
  }

  /**
   * A hibernation whose RAM went into the migration stream (a VM started from a snapshot, or
   * resumed) gets its RAM as a file of its own (ram-file.ts), which its resume maps instead of
   * reading the stream back. Built beside the stream's and put in its place when complete (a kill
   * leaves one or the other, settled at start); a failure keeps the stream's, logged.
   */
  private async giveRamFile(vm: VmRef) {
    const saved = await readHibernation(vm);
    if (!saved || saved.ramFile || saved.ignoreShared !== false) return;
    const { dir: _dir, stateFile, ramFile: _ram, bytes: _bytes, ...record } = saved;
    const started = Date.now();
    let build: string | undefined;
    try {
      await checkRoom(vm.dir, saved.config.memorySize ?? 0, `the RAM file of ${vm.name}'s hibernation`);
      build = await newBuildDir(vm);
      await writeIntent(vm, { op: "hibernate", temp: build });
      await writeRamFile({
        name: vm.name,
        vmDir: vm.dir,
        config: saved.config,
        stateFile,
        outDir: build,
        timeoutMs: SAVE_TIMEOUT_MS,
      });
      await completeBuild(build, { ...record, ignoreShared: true });
      await installBuild(vm, build);
      await this.log.info("Hibernation given a RAM file", { vm: vm.name, ms: Date.now() - started });
    } catch (err) {
      if (build) await rm(build, { recursive: true, force: true });
      await this.log.error("A hibernation keeps its RAM in the stream (its resume reads it all back)", {
        vm: vm.name,
        error: (err as Error).message,
      });
    } finally {
      await clearIntent(vm);
    }
  }

  /** Starts a hibernated VM's QEMU from its saved state, at its own address; resolves once it runs. */
  async resume(name: string, beforeStart?: () => Promise<void>) {
    const vm = await this.store.find(vmName(name));
    const started = Date.now();
    await this.locks.run(vm.dir, async () => {
      this.activity.assertIdle(vm, "resume");
      await this.starting.get(vm.dir);
      if (await liveSession(vm.dir)) {
        throw new HostError("conflict", `Virtual machine already running: ${vm.name} (nothing to resume)`);
      }
      const saved = await readHibernation(vm);
      if (!saved) {
        throw new HostError("conflict", `Cannot resume ${vm.name}: it is not hibernated (run it instead)`);
      }
      await writeIntent(vm, { op: "resume" });
      try {
        const restore: RestoreFrom = {
          vm: vm.name,
          snapshot: "hibernation",
          stateFile: saved.stateFile,
          ramFile: saved.ramFile,
          ignoreShared: saved.ignoreShared ?? true,
        };
        await beforeStart?.();
        await this.startFrom(vm, saved.config, restore, saved);
        await consume(vm);
      } finally {
        await clearIntent(vm);
      }
    });
    this.changed(vm.name);
    await this.log.info("VM resumed", { vm: vm.name, ms: Date.now() - started });
  }

  /** Where a hibernated VM is reached: its computer server's and SSH's ports, and its VNC. */
  async wakeAddresses(name: string): Promise<WakeAddress[]> {
    const vm = await this.store.find(vmName(name));
    const saved = await readHibernation(vm);
    if (!saved) return [];
    const addresses = Object.values(saved.forwardedPorts).map((port) => ({ host: saved.ipAddress, port }));
    if (saved.vnc?.port) addresses.push({ host: saved.vnc.host, port: saved.vnc.port });
    return addresses;
  }

  /**
   * What a killed service left of a hibernate or a resume (its intent): finished to one side. A
   * hibernation complete on disk wins (the QEMU, if any, is quit); otherwise a live QEMU runs on.
   */
  private async settleHibernation(vm: VmRef) {
    const intent = await readIntent(vm);
    const session = await liveSession(vm.dir);
    if (!intent) return dropStale(vm, session !== undefined);
    if (intent.op === "hibernate") {
      if (intent.temp && (await readBuild(intent.temp))) await installBuild(vm, intent.temp);
      else if (intent.temp) await rm(intent.temp, { recursive: true, force: true });
      // A RAM file's QEMU (ram-file.ts) died with the service; its QMP socket may be outside the build.
      if (intent.temp) await rm(qmpSocketPath(intent.temp), { force: true });
      if (await readHibernation(vm)) {
        if (session) await stopQemu(vm.dir, session, 0);
      } else if (session) {
        const qmp = await QmpClient.connect(session.qmpSocket).catch(() => undefined);
        await qmp?.execute("cont").catch(() => undefined);
        qmp?.close();
      }
    } else if (session) {
      const qmp = await QmpClient.connect(session.qmpSocket).catch(() => undefined);
      const status = await qmp
        ?.execute<{ status: string }>("query-status")
        .then((s) => s.status)
        .catch(() => undefined);
      qmp?.close();
      // Running: the resume got through (its state is spent). Otherwise it never ran: asleep again.
      if (status === "running") await consume(vm);
      else await stopQemu(vm.dir, session, 0);
    }
    await clearIntent(vm);
    await this.log.info("An interrupted hibernate or resume was settled", {
      vm: vm.name,
      operation: intent.op,
      now: (await readHibernation(vm)) ? "hibernated" : (await liveSession(vm.dir)) ? "running" : "stopped",
    });
  }

  /** A hibernated VM's record: asleep, with the address, ports and VNC it will have again. */
  private async hibernatedDetails(vm: VmRef, config: VmConfig, saved: Hibernation): Promise<QemuRecord> {
    const details = vmDetails(vm, config, await this.store.diskUsage(vm, config), {
      starting: false,
      session: { ...saved, pid: null, qmpSocket: "", accelerator: "", sharedDirectories: [], startedAt: "" },
      // A resume that failed leaves the VM asleep, and says why.
      lastError: await readFile(join(vm.dir, LAST_ERROR_FILE), "utf8").then(
        (text) => text.trim(),
        () => null,
      ),
      ssh: this.ssh,
      hibernated: true,
    });
    return {
      ...details,
      runtime: "qemu",
      startedAt: null,
      hibernation: "memory",
      hibernatedAt: saved.hibernatedAt,
      hibernationBytes: saved.bytes,
      ...(saved.restoredFrom && { restoredFrom: saved.restoredFrom }),
    };
  }

  /** True while the VM's QEMU lives or is being started. */
  async isRunning(vm: VmRef) {
    return this.starting.has(vm.dir) || (await liveSession(vm.dir)) !== undefined;
  }

  private async details(vm: VmRef): Promise<QemuRecord> {
    const config = await readVmConfig(vm.dir);
    const starting = this.starting.has(vm.dir);
    const session = starting ? undefined : await this.completedSession(vm);
    const saved = starting || session ? undefined : await readHibernation(vm);
    if (saved) return this.hibernatedDetails(vm, config, saved);
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
      ...(session?.bootId && { bootId: session.bootId }),
      ...(session?.restoredFrom && { restoredFrom: session.restoredFrom }),
    };
    const push = this.activity.push(vm);
    return push ? { ...record, push } : record;
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

/** A snapshot that could not be made, said plainly: a full disk is named as such. */
function snapshotFailure(err: unknown, vm: string, snap: string, running: boolean): Error {
  const message = (err as Error).message;
  const after = running ? " The VM keeps running." : "";
  if ((err as NodeJS.ErrnoException).code === "ENOSPC" || /no space left|is the disk full/i.test(message)) {
    return new HostError("failed", `Cannot snapshot ${vm} as ${snap}: no space left on the disk.${after}`);
  }
  return new HostError("failed", `Cannot snapshot ${vm} as ${snap}: ${message}.${after}`);
}

async function exists(path: string) {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Where a snapshot's state is, for a restore or a fork. */
function fromSnapshot(snapshot: Snapshot): RestoreFrom {
  return {
    vm: snapshot.vm,
    snapshot: snapshot.name,
    stateFile: snapshot.stateFile,
    ramFile: snapshot.ramFile,
  };
}

/** A hibernate that could not be done, said plainly: a full disk is named as such. */
function hibernateFailure(err: unknown, vm: string): Error {
  const message = (err as Error).message;
  if ((err as NodeJS.ErrnoException).code === "ENOSPC" || /no space left|is the disk full/i.test(message)) {
    return new HostError(
      "failed",
      `Cannot hibernate ${vm}: no space left on the disk. The VM keeps running.`,
    );
  }
  return new HostError("failed", `Cannot hibernate ${vm}: ${message}. The VM keeps running.`);
}

function hibernatedConflict(name: string, what: string) {
  return new HostError(
    "conflict",
    `${name} is hibernated and cannot be ${what}: resume it (or stop it, which gives up its saved state) first`,
  );
}

function alreadyRunning(name: string) {
  return new HostError("failed", `Virtual machine already running: ${name}`);
}

function notFound(name: string) {
  return new HostError("not_found", `Virtual machine not found: ${name}`);
}

/** A second name for `file` (a hard link at `aside`); undefined when there is no file. */
async function keepAside(file: string, aside: string): Promise<string | undefined> {
  try {
    await link(file, aside);
    return aside;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}
