/**
 * `hangar vm pull|push|images|prune`: the image routes of the host service. Pull and push start
 * the work in the service and follow it on the VM's record, with a progress bar on a terminal.
 */
import type cliProgress from "cli-progress";
import type { Command } from "commander";
import { InvalidArgumentError } from "commander";
import { formatBytes } from "../common/sizes.js";
import { clientOf, clientOptions, type HostClient, type Json, output, table } from "./host-client.js";

const POLL_MS = 500;

function chunkSize(value: string) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 16384)
    throw new InvalidArgumentError("expected MiB from 1 to 16384");
  return n;
}

/** A bar on stderr when it is a terminal and the output is for people; otherwise nothing. */
async function progressBar(opts: { json?: boolean }, label: string) {
  if (opts.json || !process.stderr.isTTY) return undefined;
  const { default: bars } = await import("cli-progress");
  const bar = new bars.SingleBar(
    { format: `${label} [{bar}] {percentage}% {detail}`, hideCursor: true, clearOnComplete: true },
    bars.Presets.shades_classic,
  );
  bar.start(100, 0, { detail: "" });
  return bar;
}

/** Polls the VM's record until `done` says the work is over; keeps the bar in step. */
async function follow(
  client: HostClient,
  path: string,
  bar: cliProgress.SingleBar | undefined,
  step: (vm: Json) => { percent: number; detail?: string; done: boolean },
): Promise<Json> {
  try {
    for (;;) {
      const vm = await client.request<Json>("GET", path);
      const state = step(vm);
      bar?.update(Math.floor(state.percent), { detail: state.detail ?? "" });
      if (state.done) return vm;
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  } finally {
    bar?.stop();
  }
}

const withStorage = (path: string, storage?: string) =>
  storage ? `${path}?storage=${encodeURIComponent(storage)}` : path;

export function registerImageCommands(vm: Command) {
  clientOptions(
    vm
      .command("pull <image> [name]")
      .description(
        "Pull a lume-format image (name:tag) into a new VM (default name: <name>_<tag>), or with --runtime container a container image",
      ),
  )
    .option("--registry <host>", "registry host (default from the settings: ghcr.io)")
    .option("--organization <org>", "organization (default from the settings: trycua)")
    .option("--storage <location>", "storage location (name or path)")
    .option("--runtime <kind>", "container: pull a container image (registry/name:tag) into the engine")
    .action(async (image: string, name: string | undefined, opts) => {
      const client = clientOf(opts);
      if (opts.runtime && opts.runtime !== "qemu") {
        process.stderr.write(
          `Pulling ${image} into the ${opts.runtime} runtime (progress in hangar logs)…\n`,
        );
        const pulled = await client.request<Json>("POST", "/svc/pull", { image, runtime: opts.runtime });
        return output(opts, pulled, () => `Pulled ${image}.`);
      }
      const target = name ?? image.replace(":", "_");
      await client.request("POST", "/svc/pull/start", {
        image,
        name: target,
        registry: opts.registry,
        organization: opts.organization,
        storage: opts.storage,
      });
      const bar = await progressBar(opts, `Pulling ${image}`);
      const vmPath = withStorage(`/svc/vms/${encodeURIComponent(target)}`, opts.storage);
      const pulled = await follow(client, vmPath, bar, (record) => ({
        percent: record.status === "pulling" ? (record.downloadProgress ?? 0) : 100,
        done: record.status !== "pulling",
      }));
      output(opts, pulled, () => `Pulled ${image} into ${target}.`);
    });

  clientOptions(
    vm
      .command("push <name> <image>")
      .description("Push a stopped VM as a lume-format image (image: name:tag) to a registry"),
  )
    .option("--additional-tags <tags...>", "more tags for the same image")
    .option("--chunk-size-mb <mib>", "disk chunk size in MiB", chunkSize, 512)
    .option("--single-layer", "the whole disk as one layer (no chunks)")
    .option("--registry <host>", "registry host (default from the settings: ghcr.io)")
    .option("--organization <org>", "organization (default from the settings: trycua)")
    .option("--storage <location>", "storage location (name or path)")
    .action(async (name: string, image: string, opts) => {
      const match = /^([^:]+):([^:]+)$/.exec(image);
      if (!match)
        throw new Error(`Invalid image format. Expected format: name:tag (got ${JSON.stringify(image)})`);
      const client = clientOf(opts);
      const started = await client.request<Json>("POST", "/svc/vms/push", {
        name,
        imageName: match[1],
        tags: [match[2], ...(opts.additionalTags ?? [])],
        chunkSizeMb: opts.chunkSizeMb,
        singleLayer: opts.singleLayer,
        registry: opts.registry,
        organization: opts.organization,
        storage: opts.storage,
      });
      const bar = await progressBar(opts, `Pushing ${name}`);
      const vmPath = withStorage(`/svc/vms/${encodeURIComponent(started.name)}`, opts.storage);
      const pushed = await follow(client, vmPath, bar, (record) => ({
        percent: record.push?.progress ?? 0,
        detail: record.push ? `${formatBytes(record.push.uploadedBytes ?? 0)} sent` : "",
        done: record.push?.status !== "pushing",
      }));
      if (pushed.push?.status !== "pushed")
        throw new Error(`Push failed: ${pushed.push?.error ?? "unknown error"}`);
      output(
        opts,
        pushed.push,
        (push: Json) => `Pushed ${name} as ${match[1]}:${push.tags.join(", ")} (${push.manifestDigest}).`,
      );
    });

  clientOptions(
    vm.command("images").description("List the VM images in the local cache and the container images"),
  )
    .option("--organization <org>", "organization (default from the settings)")
    .action(async (opts) => {
      const client = clientOf(opts);
      // The cache is listed per organization: say which one, the settings' when none was given.
      const organization: string =
        opts.organization ?? (await client.request<Json>("GET", "/svc/config")).registry.ghcr.organization;
      const images = await client.request<Json[]>(
        "GET",
        `/svc/images?organization=${encodeURIComponent(organization)}`,
      );
      const other = opts.organization ? "" : " (--organization for another)";
      output(opts, images, (list: Json[]) =>
        list.length === 0
          ? `No cached images of organization ${organization}${other}.`
          : `Images (VM images of organization ${organization}${other}, and container images):\n${table(
              list.map((i) => ({ ...i, state: i.status ? `${i.status} ${i.progress ?? ""}`.trim() : null })),
              [
                ["kind", "KIND"],
                ["repository", "REPOSITORY"],
                ["imageId", "IMAGE ID"],
                ["state", "STATE"],
              ],
            )}`,
      );
    });

  clientOptions(vm.command("prune").description("Remove every cached image")).action(async (opts) => {
    const freed = await clientOf(opts).request<Json>("POST", "/svc/prune");
    output(opts, freed, (r: Json) =>
      r.removedImages === 0 && r.freedBytes === 0
        ? "The image cache was already empty."
        : `Removed ${r.removedImages} cached image(s), freed ${formatBytes(r.freedBytes)}.`,
    );
  });
}
