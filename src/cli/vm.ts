/**
 * `hangar vm ls|get|create|rm|clone|set|run|wait|logs|stop`: the VM routes of the host service;
 * `snapshot|snapshots|restore|fork` are in vm-snapshots.ts, `hibernate|resume` in vm-sleep.ts.
 */
import { type Command, InvalidArgumentError } from "commander";
import { formatBytes } from "../common/sizes.js";
import { describeNetwork, policyArgument, registerEgress } from "./egress.js";
import { clientOf, clientOptions, type Json, output, table } from "./host-client.js";
import { UsageError } from "./util.js";
import { registerVmSleep } from "./vm-sleep.js";
import { registerVmSnapshots } from "./vm-snapshots.js";

type Vm = Json;

const VM_COLUMNS: [string, string][] = [
  ["name", "NAME"],
  ["os", "OS"],
  ["cpuCount", "CPU"],
  ["memory", "MEMORY"],
  ["disk", "DISK (USED/SIZE)"],
  ["display", "DISPLAY"],
  ["status", "STATUS"],
  ["ipAddress", "IP"],
  ["vnc", "VNC"],
  ["locationName", "LOCATION"],
];

function vmRow(vm: Vm) {
  return {
    ...vm,
    memory: formatBytes(vm.memorySize ?? 0),
    disk: `${formatBytes(vm.diskSize?.allocated ?? 0)}/${formatBytes(vm.diskSize?.total ?? 0)}`,
    vnc: vm.vncUrl,
  };
}

function describeVm(vm: Vm): string {
  const row = vmRow(vm);
  const lines: [string, unknown][] = [
    ["name", vm.name],
    ["status", vm.hibernation ? `${vm.status} (${vm.hibernation})` : vm.status],
    ["os", vm.os],
    ["cpu", vm.cpuCount],
    ["memory", row.memory],
    ["disk", row.disk],
    ["display", vm.display],
    ["location", vm.locationName],
    ["ip address", vm.ipAddress],
    ["computer server", vm.computerServerUrl],
    ["vnc", vm.vncUrl],
    ["ssh available", vm.sshAvailable],
    ["mac address", vm.macAddress],
    ["network", describeNetwork(vm.network)],
    [
      "idle timeout",
      vm.idleTimeout
        ? `${vm.idleTimeout} s (hibernated${vm.idleMode ? ` with '${vm.idleMode}'` : ""} when idle that long)`
        : undefined,
    ],
    [
      "shared dirs",
      vm.sharedDirectories
        ?.map((s: Vm) => `${s.hostPath} (tag ${s.tag}${s.readOnly ? ", ro" : ""})`)
        .join(", "),
    ],
    ["last error", vm.lastError],
  ];
  return lines
    .filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => `${`${k}:`.padEnd(17)}${v}`)
    .join("\n");
}

function positiveInt(value: string) {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError("expected a whole number above 0");
  return n;
}

/** `path[:ro|:rw]`, as lume's --shared-dir. */
function sharedDir(value: string, previous: { hostPath: string; readOnly: boolean }[] = []) {
  const match = /^(.*?)(?::(ro|rw))?$/.exec(value)!;
  return [...previous, { hostPath: match[1], readOnly: match[2] === "ro" }];
}

const vmPath = (name: string) => `/svc/vms/${encodeURIComponent(name)}`;
const withStorage = (path: string, storage?: string) =>
  storage ? `${path}?storage=${encodeURIComponent(storage)}` : path;

export function registerVm(program: Command) {
  const vm = program.command("vm").description("Manage the VMs of a host service (hangar host serve)");

  clientOptions(vm.command("ls").alias("list").description("List the VMs"))
    .option("--storage <location>", "only this storage location (name or path)")
    .action(async (opts) => {
      const vms = await clientOf(opts).request<Vm[]>("GET", withStorage("/svc/vms", opts.storage));
      output(opts, vms, (list: Vm[]) => (list.length === 0 ? "No VMs." : table(list.map(vmRow), VM_COLUMNS)));
    });

  clientOptions(vm.command("get <name>").description("Show one VM"))
    .option("--storage <location>", "storage location (name or path)")
    .action(async (name, opts) => {
      output(
        opts,
        await clientOf(opts).request<Json>("GET", withStorage(vmPath(name), opts.storage)),
        describeVm,
      );
    });

  clientOptions(
    vm.command("create <name>").description("Create a VM with an empty disk (UEFI firmware, sparse disk)"),
  )
    .option("--os <os>", "guest operating system", "linux")
    .option("--cpu <n>", "virtual CPUs", positiveInt, 2)
    .option("--memory <size>", "memory, e.g. 4GB", "4GB")
    .option("--disk-size <size>", "disk size, e.g. 50GB (sparse)", "50GB")
    .option("--display <WxH>", "display resolution", "1024x768")
    .option("--storage <location>", "storage location (name or path)")
    .option("--runtime <kind>", "what runs it: qemu, container or kubernetes (default: the service's)")
    .option("--image <ref>", "a container desktop's image (default: the service's desktop image)")
    .option(
      "--network <policy>",
      "cage it: an egress policy, deny, allow or JSON (docs/egress.md)",
      policyArgument,
    )
    .option("--idle-timeout <duration>", "hibernate it once idle this long, e.g. 300s or 5m (default: never)")
    .option(
      "--idle-mode <mode>",
      "what it keeps when idle: memory, paused or disk (a container's disk frees its memory; default: the runtime's)",
    )
    .action(async (name, opts) => {
      const body = {
        network: opts.network,
        idleTimeout: opts.idleTimeout,
        idleMode: opts.idleMode,
        name,
        runtime: opts.runtime,
        image: opts.image,
        os: opts.os,
        cpu: opts.cpu,
        memory: opts.memory,
        diskSize: opts.diskSize,
        display: opts.display,
        storage: opts.storage,
      };
      output(opts, await clientOf(opts).request<Json>("POST", "/svc/vms", body), (r) => `Created ${r.name}.`);
    });

  clientOptions(
    vm.command("rm <name>").alias("delete").description("Delete a VM and its files (stops it first)"),
  )
    .option("--storage <location>", "storage location (name or path)")
    .action(async (name, opts) => {
      await clientOf(opts).request<Json>("DELETE", withStorage(vmPath(name), opts.storage));
      output(opts, { message: "VM deleted", name }, () => `Deleted ${name}.`);
    });

  clientOptions(
    vm.command("clone <name> <newName>").description("Copy a stopped VM (sparse copy, new MAC address)"),
  )
    .option("--source-storage <location>", "where the VM is")
    .option("--dest-storage <location>", "where the copy goes (default location if omitted)")
    .action(async (name, newName, opts) => {
      const body = { name, newName, sourceLocation: opts.sourceStorage, destLocation: opts.destStorage };
      output(
        opts,
        await clientOf(opts).request<Json>("POST", "/svc/vms/clone", body),
        () => `Cloned ${name} to ${newName}.`,
      );
    });

  clientOptions(
    vm.command("set <name>").description("Change a stopped VM: CPU, memory, display, grow the disk, move it"),
  )
    .option("--cpu <n>", "virtual CPUs", positiveInt)
    .option("--memory <size>", "memory, e.g. 8GB")
    .option("--disk-size <size>", "new disk size (grow only)")
    .option("--display <WxH>", "display resolution")
    .option("--storage <location>", "move the VM to this storage location")
    .option(
      "--idle-timeout <duration>",
      "hibernate it once idle this long (e.g. 5m; off: never); running or not",
    )
    .option("--idle-mode <mode>", "what it keeps when idle: memory, paused, disk, or default (the runtime's)")
    .action(async (name, opts) => {
      const body = {
        idleTimeout: opts.idleTimeout,
        idleMode: opts.idleMode,
        cpu: opts.cpu,
        memory: opts.memory,
        diskSize: opts.diskSize,
        display: opts.display,
        storage: opts.storage,
      };
      if (Object.values(body).every((value) => value === undefined)) {
        throw new UsageError(
          "vm set: nothing to change: give at least one of --cpu, --memory, --disk-size, --display, --storage, --idle-timeout, --idle-mode",
        );
      }
      output(opts, await clientOf(opts).request<Json>("PATCH", vmPath(name), body), () => `Updated ${name}.`);
    });

  clientOptions(
    vm
      .command("run <name>")
      .description("Start a VM (returns at once, or with --wait once its computer server answers)"),
  )
    .option("--no-vnc", "no VNC server for this run")
    .option("--shared-dir <path[:ro|:rw]>", "share a host directory (virtio-9p), repeatable", sharedDir)
    .option("--storage <location>", "storage location (name or path)")
    .option("--wait", "wait until the desktop is ready, showing the time it takes")
    .option("--timeout <seconds>", "with --wait: give up after this long", waitSeconds, 300)
    .action(async (name, opts) => {
      const body = {
        noDisplay: !opts.vnc,
        vnc: opts.vnc ? "enabled" : "disabled",
        sharedDirectories: opts.sharedDir ?? [],
        storage: opts.storage,
      };
      const client = clientOf(opts);
      const started = await client.request<Json>("POST", `${vmPath(name)}/run`, body);
      if (!opts.wait) return output(opts, started, () => `Starting ${name}.`);
      const ready = await withProgress(`Starting ${name}`, () =>
        client.request<Json>("GET", `${vmPath(name)}?wait=ready&timeout=${opts.timeout}`),
      );
      output(opts, ready, (vm) => `${name} is ready after ${formatMs(vm.startMs)}: ${vm.computerServerUrl}`);
    });

  clientOptions(vm.command("wait <name>").description("Wait until a running VM's computer server answers"))
    .option("--timeout <seconds>", "give up after this long", waitSeconds, 300)
    .action(async (name, opts) => {
      const ready = await withProgress(`Waiting for ${name}`, () =>
        clientOf(opts).request<Json>("GET", `${vmPath(name)}?wait=ready&timeout=${opts.timeout}`),
      );
      output(
        opts,
        ready,
        (vm) => `${name} is ready (${formatMs(vm.startMs)} from its start): ${vm.computerServerUrl}`,
      );
    });

  clientOptions(vm.command("logs <name>").description("Show a VM's console output, like `docker logs`"))
    .option("-f, --follow", "keep showing what it writes until interrupted")
    .option("-n, --tail <lines>", "only the last lines", positiveInt)
    .action(async (name, opts) => {
      const query = new URLSearchParams();
      if (opts.follow) query.set("follow", "1");
      if (opts.tail !== undefined) query.set("lines", String(opts.tail));
      const interrupted = new AbortController();
      process.once("SIGINT", () => interrupted.abort());
      const body = await clientOf(opts).stream(`${vmPath(name)}/logs?${query}`, interrupted.signal);
      try {
        for await (const chunk of body) process.stdout.write(chunk);
      } catch (err) {
        if (!interrupted.signal.aborted) throw err;
      }
    });

  clientOptions(
    vm.command("stop <name>").description("Stop a VM: power button, then quit after a grace period"),
  )
    .option("--storage <location>", "storage location (name or path)")
    .option("--force", "quit QEMU at once, without asking the guest to power down")
    .option(
      "--grace <seconds>",
      "how long the guest may take to power down (default: the service's)",
      seconds,
    )
    .action(async (name, opts) => {
      const body = { storage: opts.storage, force: opts.force, graceSeconds: opts.grace };
      output(opts, await clientOf(opts).request<Json>("POST", `${vmPath(name)}/stop`, body), (r: Json) =>
        r.outcome === "powered down" || r.outcome === undefined
          ? `Stopped ${name}.`
          : `Stopped ${name} (${r.outcome === "killed" ? "QEMU was killed" : "QEMU quit without a guest power-down"}).`,
      );
    });

  registerVmSnapshots(vm, { withProgress, waitSeconds });
  registerVmSleep(vm, { withProgress, waitSeconds });
  registerEgress(program, vm);
}

function seconds(value: string): number {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < 0 || n > 600) {
    throw new InvalidArgumentError("expected a number of seconds from 0 to 600");
  }
  return n;
}

function waitSeconds(value: string): number {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n <= 0 || n > 900) {
    throw new InvalidArgumentError("expected a number of seconds from 1 to 900");
  }
  return n;
}

function formatMs(ms: unknown): string {
  return typeof ms === "number" ? `${(ms / 1000).toFixed(1)} s` : "an unknown time";
}

/**
 * Runs `task` while telling the person it goes on: a line on stderr that counts the seconds on a
 * terminal, one line at the start otherwise (logs stay readable).
 */
async function withProgress<T>(what: string, task: () => Promise<T>): Promise<T> {
  const started = Date.now();
  const tty = process.stderr.isTTY;
  const show = () => process.stderr.write(`\r${what}… ${Math.round((Date.now() - started) / 1000)} s`);
  if (tty) show();
  else process.stderr.write(`${what}…\n`);
  const timer = tty ? setInterval(show, 1000) : undefined;
  try {
    return await task();
  } finally {
    clearInterval(timer);
    if (tty) process.stderr.write("\n");
  }
}
