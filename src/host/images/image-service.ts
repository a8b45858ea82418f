/**
 * What the image routes ask for: pull an image into a new VM (at once, or in the background with
 * progress on the VM's record), push a stopped VM in the background (progress and outcome in the
 * log and on the VM's record), list the cached images and prune them. Knows nothing of HTTP.
 */
import { readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../../common/atomic-write.js";
import { settled } from "../../common/settled.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { vmName } from "../names.js";
import { PUSH_RECORD_FILE, PUSH_WORK_DIR, readVmConfig } from "../qemu/vm-config.js";
import type { VmRef, VmStore } from "../qemu/vm-store.js";
import type { PullRequest, PushRequest } from "../requests.js";
import { ensureWritableDirectory, type SettingsStore } from "../settings.js";
import {
  checkImageName,
  checkOrganization,
  checkTag,
  ImageCache,
  parseImageReference,
  pullImage,
  pushVm,
  registryBaseUrl,
} from "./oci/index.js";
import type { PullRecord, PushState, VmActivity } from "./vm-activity.js";

type PreparedPull = Awaited<ReturnType<ImageService["preparePull"]>>;

type PullTracker = { status: "pulling"; progress: number } | { status: "failed"; message: string };

/** What the image service is built from (the host's composition root hands it over). */
export interface ImageServiceDeps {
  settings: SettingsStore;
  store: VmStore;
  log: HostLog;
  /** Whether a VM's QEMU runs (or is being started): a running VM is not pushed. */
  isRunning(vm: VmRef): Promise<boolean>;
}

export class ImageService implements VmActivity {
  /** Background pulls by tracker key (the requested name, or the image name), as lume keys them. */
  private readonly pulls = new Map<string, PullTracker>();
  /** VM directories being pulled into (sync or background). */
  private readonly pullingInto = new Set<string>();
  /** Pushes by `<location name>/<vm name>`. */
  private readonly pushes = new Map<string, PushState>();
  private readonly background = new Set<Promise<unknown>>();

  constructor(private readonly services: ImageServiceDeps) {}

  /** A new VM of a name ends the story of a failed pull into that name. */
  record(name: string) {
    if (this.pulls.get(name)?.status === "failed") this.pulls.delete(name);
  }

  /** While a VM is pushed its disk must not change: no run, update or delete until the push ends. */
  assertIdle(vm: VmRef, action: string) {
    if (this.pushes.get(pushKey(vm.location.name, vm.name))?.status === "pushing") {
      throw new HostError("failed", `Cannot ${action} ${vm.name}: an image push of it is in progress`);
    }
  }

  /**
   * At start-up: a push the last service did not finish (its record still says `pushing`) is
   * reported failed, and its work directory removed.
   */
  async recover() {
    for (const vm of await this.services.store.list()) {
      await rm(join(vm.dir, PUSH_WORK_DIR), { recursive: true, force: true });
      const text = await readFile(join(vm.dir, PUSH_RECORD_FILE), "utf8").catch(() => undefined);
      if (text === undefined) continue;
      let state: PushState;
      try {
        state = JSON.parse(text) as PushState;
      } catch {
        continue;
      }
      if (state.status !== "pushing") continue;
      const failed: PushState = {
        ...state,
        status: "failed",
        finishedAt: new Date().toISOString(),
        error: "Interrupted: the host service stopped before the push finished",
      };
      this.pushes.set(pushKey(vm.location.name, vm.name), failed);
      await writeFileAtomic(join(vm.dir, PUSH_RECORD_FILE), JSON.stringify(failed));
    }
  }

  private get log(): HostLog {
    return this.services.log;
  }

  /** Pulls at once; resolves when the VM is in place. Meanwhile the VM's record shows the pull. */
  async pull(request: PullRequest): Promise<{ name: string; dir: string }> {
    const prepared = await this.preparePull(request);
    return this.trackedPull(request.name ?? prepared.ref.name, prepared);
  }

  /**
   * Checks the request, the location and that the VM does not exist yet (a 400 at once), then
   * pulls in the background; returns lume's tracker key.
   */
  async startPull(request: PullRequest): Promise<string> {
    const prepared = await this.preparePull(request);
    const key = request.name ?? prepared.ref.name;
    if (this.pulls.get(key)?.status === "pulling") {
      throw new HostError("failed", `A pull into ${key} is already in progress`);
    }
    this.track(this.trackedPull(key, prepared));
    return key;
  }

  /** Runs a pull under lume's tracker key: `pulling` with progress, then gone, or a sticky failure. */
  private async trackedPull(key: string, prepared: PreparedPull) {
    if (this.pulls.get(key)?.status === "pulling") {
      throw new HostError("failed", `A pull into ${key} is already in progress`);
    }
    const tracker: PullTracker = { status: "pulling", progress: 0 };
    this.pulls.set(key, tracker);
    try {
      const vm = await this.runPull(prepared, (percent) => {
        tracker.progress = Math.min(100, Math.round(percent * 10) / 10);
      });
      this.pulls.delete(key);
      return vm;
    } catch (error) {
      this.pulls.set(key, { status: "failed", message: (error as Error).message });
      throw error;
    }
  }

  private async preparePull(request: PullRequest) {
    const settings = await this.services.settings.read();
    const ref = parseImageReference(request.image);
    const name = vmName(request.name ?? `${ref.name}_${ref.tag}`);
    const registry = request.registry ?? settings.registry.registry;
    registryBaseUrl(registry); // a bad registry is a 400 now, not a failure later
    const organization = checkOrganization(request.organization ?? settings.registry.organization);
    const location = await this.services.settings.location(request.storage);
    await ensureWritableDirectory(location.path);
    const dir = join(location.path, name);
    if (this.pullingInto.has(dir))
      throw new HostError("failed", `A pull into ${name} is already in progress`);
    if (
      await stat(dir).then(
        () => true,
        () => false,
      )
    ) {
      throw new HostError("failed", `Virtual machine already exists with name: ${name}`);
    }
    return { request, settings, ref, name, dir, registry, organization };
  }

  private async runPull(
    {
      request,
      settings,
      name,
      dir,
      registry,
      organization,
    }: Awaited<ReturnType<ImageService["preparePull"]>>,
    onProgress?: (percent: number) => void,
  ): Promise<{ name: string; dir: string }> {
    if (this.pullingInto.has(dir))
      throw new HostError("failed", `A pull into ${name} is already in progress`);
    this.pullingInto.add(dir);
    const fields = { image: request.image, vm: name, registry, organization };
    await this.log.info("Image pull started", fields);
    let logged = 0;
    try {
      const result = await pullImage({
        image: request.image,
        registry,
        organization,
        destDir: dir,
        cacheDirectory: this.services.settings.expand(settings.cacheDirectory),
        cachingEnabled: settings.cachingEnabled,
        retry: this.retryLogging(fields),
        onProgress: (p) => {
          const percent = p.totalBytes > 0 ? (100 * p.doneBytes) / p.totalBytes : 0;
          onProgress?.(percent);
          if (percent >= logged + 25) {
            logged = Math.floor(percent / 25) * 25;
            void this.log.info("Image pull progress", { ...fields, percent: logged });
          }
        },
      });
      await this.log.info("Image pulled", {
        ...fields,
        digest: result.manifestDigest,
        diskSize: result.diskSize,
        downloadedBlobs: result.downloadedBlobs,
        cachedBlobs: result.cachedBlobs,
      });
      return { name, dir };
    } catch (error) {
      await this.log.error("Image pull failed", { ...fields, error: (error as Error).message });
      throw error;
    } finally {
      this.pullingInto.delete(dir);
    }
  }

  /** The synthetic record of a pull in progress (lume's), or undefined when none is tracked. */
  pulling(key: string): PullRecord | undefined {
    const tracker = this.pulls.get(key);
    if (tracker?.status !== "pulling") return undefined;
    return { name: key, status: "pulling", downloadProgress: tracker.progress };
  }

  /** lume's sticky `Pull failed for '<key>': …` after a failed pull, if there was one. */
  pullFailure(key: string): HostError | undefined {
    const tracker = this.pulls.get(key);
    if (tracker?.status !== "failed") return undefined;
    return new HostError("failed", `Pull failed for '${key}': ${tracker.message}`);
  }

  /** Checks the request and the VM (it exists and is stopped), then pushes in the background. */
  async startPush(request: PushRequest): Promise<{ name: string }> {
    checkImageName(request.imageName);
    if (request.tags.length === 0)
      throw new HostError("invalid_params", "At least one tag is required in tags");
    request.tags.forEach(checkTag);
    const settings = await this.services.settings.read();
    const registry = request.registry ?? settings.registry.registry;
    registryBaseUrl(registry);
    const organization = checkOrganization(request.organization ?? settings.registry.organization);
    const vm = await this.services.store.find(vmName(request.name), request.storage);
    if (await this.services.isRunning(vm)) {
      throw new HostError("failed", `Cannot push ${vm.name}: the VM is running. Stop it first.`);
    }
    if ((await readVmConfig(vm.dir)).diskFormat === "qcow2") {
      throw new HostError(
        "failed",
        `Cannot push ${vm.name}: its disk is built on a snapshot. Clone it first (a clone's disk is whole) and push the clone.`,
      );
    }
    const key = pushKey(vm.location.name, vm.name);
    if (this.pushes.get(key)?.status === "pushing") {
      throw new HostError("failed", `A push of ${vm.name} is already in progress`);
    }
    const state: PushState = {
      status: "pushing",
      imageName: request.imageName,
      tags: request.tags,
      registry,
      organization,
      progress: 0,
      uploadedBytes: 0,
      startedAt: new Date().toISOString(),
      finishedAt: null,
      manifestDigest: null,
      error: null,
    };
    this.pushes.set(key, state);
    // On disk too, so that a service killed mid-push reports it failed after a restart.
    const record = join(vm.dir, PUSH_RECORD_FILE);
    await writeFileAtomic(record, JSON.stringify(state));
    const fields = {
      vm: vm.name,
      image: `${organization}/${request.imageName}`,
      registry,
      tags: request.tags.join(","),
    };
    await this.log.info("Image push started", fields);
    let logged = 0;
    const pushing = pushVm({
      vmDir: vm.dir,
      imageName: request.imageName,
      tags: request.tags,
      registry,
      organization,
      chunkSizeMb: request.chunkSizeMb,
      singleLayer: request.singleLayer,
      retry: this.retryLogging(fields),
      onProgress: (p) => {
        state.progress = Math.min(99, Math.floor((100 * p.processedBytes) / Math.max(1, p.totalBytes)));
        state.uploadedBytes = p.uploadedBytes;
        if (state.progress >= logged + 25) {
          logged = Math.floor(state.progress / 25) * 25;
          void this.log.info("Image push progress", { ...fields, percent: logged });
        }
      },
    }).then(
      async (result) => {
        Object.assign(state, { status: "pushed", progress: 100, manifestDigest: result.manifestDigest });
        await this.log.info("Image pushed", {
          ...fields,
          digest: result.manifestDigest,
          uploadedBlobs: result.uploadedBlobs,
          skippedBlobs: result.skippedBlobs,
          uploadedBytes: result.uploadedBytes,
        });
      },
      async (error) => {
        Object.assign(state, { status: "failed", error: (error as Error).message });
        await this.log.error("Image push failed", { ...fields, error: (error as Error).message });
      },
    );
    this.track(
      pushing.finally(async () => {
        state.finishedAt = new Date().toISOString();
        await writeFileAtomic(record, JSON.stringify(state)).catch(() => undefined);
      }),
    );
    return { name: vm.name };
  }

  /** The last push of a VM this service knows of (its `push` key), or undefined. */
  push(vm: VmRef): PushState | undefined {
    return this.pushes.get(pushKey(vm.location.name, vm.name));
  }

  async images(organization?: string) {
    const settings = await this.services.settings.read();
    const org = checkOrganization(organization ?? settings.registry.organization);
    return this.cache(settings.cacheDirectory).list(org);
  }

  async prune() {
    const settings = await this.services.settings.read();
    const freed = await this.cache(settings.cacheDirectory).prune();
    await this.log.info("Image cache pruned", { images: freed.images, bytes: freed.bytes });
    return freed;
  }

  /** Waits for every background pull and push (tests and shutdown). */
  async settled() {
    await Promise.all([...this.background]);
  }

  /** Retries with backoff, each one in the log with the reason. */
  private retryLogging(fields: Record<string, string>) {
    return {
      onRetry: (error: unknown, attempt: number, delayMs: number) => {
        void this.log.info("Registry request failed, retrying", {
          ...fields,
          attempt,
          delayMs,
          error: (error as Error).message,
        });
      },
    };
  }

  private cache(directory: string) {
    return new ImageCache(this.services.settings.expand(directory));
  }

  private track(work: Promise<unknown>) {
    const done = settled(work);
    this.background.add(done);
    void done.then(() => this.background.delete(done));
  }
}

function pushKey(locationName: string, name: string) {
  return `${locationName}\u0000${name}`;
}
