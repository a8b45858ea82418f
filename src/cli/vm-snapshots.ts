/** `hangar vm snapshot|snapshots|restore|fork`: the snapshot routes of the host service (docs/host.md). */
import { type Command, InvalidArgumentError } from "commander";
import { formatBytes } from "../common/sizes.js";
import { clientOf, clientOptions, type Json, output, table } from "./host-client.js";

export const vmPath = (name: string) => `/svc/vms/${encodeURIComponent(name)}`;

/** What vm.ts hands the commands registered beside it: a spinner around a request, and `--timeout`'s parser. */
export interface VmCommandHelpers {
  withProgress: <T>(what: string, task: () => Promise<T>) => Promise<T>;
  waitSeconds: (value: string) => number;
}

export function registerVmSnapshots(vm: Command, helpers: VmCommandHelpers) {
  const { withProgress, waitSeconds } = helpers;

  clientOptions(
    vm
      .command("snapshot <name> <snapshot>")
      .description(
        "Take a snapshot of a VM: of a running VM its whole state (RAM, devices, disk), of a stopped VM its disk",
      ),
  )
    .option("--delete", "delete the snapshot instead (refused while VMs' disks are built on it)")
    .action(async (name, snapshot, opts) => {
      const client = clientOf(opts);
      if (opts.delete) {
        await client.request<Json>("DELETE", `${vmPath(name)}/snapshots/${encodeURIComponent(snapshot)}`);
        return output(
          opts,
          { message: "Snapshot deleted", name: snapshot },
          () => `Deleted snapshot ${snapshot}.`,
        );
      }
      const made = await withProgress(`Taking snapshot ${snapshot} of ${name}`, () =>
        client.request<Json>("POST", `${vmPath(name)}/snapshots`, { name: snapshot }),
      );
      output(
        opts,
        made,
        (s) =>
          `Snapshot ${s.name} of ${s.vm}: ${s.memory ? "whole state" : "disk only"}, ${formatBytes(s.bytes)}.`,
      );
    });

  clientOptions(vm.command("snapshots <name>").description("List a VM's snapshots")).action(
    async (name, opts) => {
      const list = await clientOf(opts).request<Json[]>("GET", `${vmPath(name)}/snapshots`);
      output(opts, list, (rows: Json[]) =>
        rows.length === 0
          ? `${name} has no snapshots.`
          : table(
              rows.map((s) => ({
                ...s,
                kind: s.memory ? "whole state" : "disk only",
                size: formatBytes(s.bytes),
              })),
              [
                ["name", "NAME"],
                ["kind", "HOLDS"],
                ["size", "SIZE"],
                ["createdAt", "CREATED"],
              ],
            ),
      );
    },
  );

  clientOptions(
    vm
      .command("restore <name> <snapshot>")
      .description("Put a VM back in a snapshot's state (running again if the snapshot holds its RAM)"),
  )
    .option("--wait", "wait until its computer server answers")
    .option("--timeout <seconds>", "with --wait: give up after this long", waitSeconds, 120)
    .action(async (name, snapshot, opts) => {
      const query = opts.wait ? `?wait=ready&timeout=${opts.timeout}` : "";
      const vmRecord = await withProgress(`Restoring ${name} to ${snapshot}`, () =>
        clientOf(opts).request<Json>("POST", `${vmPath(name)}/restore${query}`, { snapshot }),
      );
      output(opts, vmRecord, (r) =>
        r.status === "running"
          ? `${name} restored to ${snapshot}: ${r.computerServerUrl}${r.ready ? ` (ready after ${((r.startMs ?? 0) / 1000).toFixed(1)} s)` : ""}`
          : `${name} restored to ${snapshot} (its disk; the VM is stopped).`,
      );
    });

  clientOptions(
    vm
      .command("fork <name> <snapshot> [names...]")
      .description(
        "Start new VMs from a snapshot: their own copy-on-write disks and ports, shared RAM pages",
      ),
  )
    .option("--count <n>", "make this many, named <prefix>-1 … (instead of names)", forkCount)
    .option("--prefix <prefix>", "with --count: the start of their names (default <name>-fork)")
    .option("--wait", "wait until their computer servers answer")
    .option("--timeout <seconds>", "with --wait: give up after this long", waitSeconds, 120)
    .action(async (name, snapshot, names: string[], opts) => {
      if (names.length > 0 && opts.count !== undefined) {
        throw new InvalidArgumentError("give either names or --count, not both");
      }
      const body =
        opts.count !== undefined ? { snapshot, count: opts.count, prefix: opts.prefix } : { snapshot, names };
      const query = opts.wait ? `?wait=ready&timeout=${opts.timeout}` : "";
      const result = await withProgress(`Forking ${name} from ${snapshot}`, () =>
        clientOf(opts).request<Json>("POST", `${vmPath(name)}/fork${query}`, body),
      );
      output(opts, result, (r) =>
        r.forks
          .map((f: Json) => `${f.name}: ${f.status}${f.computerServerUrl ? ` ${f.computerServerUrl}` : ""}`)
          .join("\n"),
      );
    });
}

function forkCount(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 32)
    throw new InvalidArgumentError("expected a whole number from 1 to 32");
  return n;
}
