/** `hangar vm hibernate|resume`: a desktop put to sleep with its identity, and woken (docs/host.md). */
import { type Command, InvalidArgumentError } from "commander";
import { formatBytes } from "../common/sizes.js";
import { clientOf, clientOptions, type Json, output } from "./host-client.js";
import { type VmCommandHelpers, vmPath } from "./vm-snapshots.js";

const MODES = ["memory", "paused", "disk"];

export function registerVmSleep(vm: Command, helpers: VmCommandHelpers) {
  const { withProgress, waitSeconds } = helpers;

  clientOptions(
    vm
      .command("hibernate <name>")
      .description(
        "Put a running desktop to sleep, keeping its address and keys: QEMU saves its memory to disk and ends; a container is paused (or stopped with its files, --mode disk)",
      ),
  )
    .option("--mode <mode>", "what is kept: memory (QEMU), paused or disk (containers, Pods: disk)", mode)
    .action(async (name, opts) => {
      const record = await withProgress(`Hibernating ${name}`, () =>
        clientOf(opts).request<Json>(
          "POST",
          `${vmPath(name)}/hibernate`,
          opts.mode ? { mode: opts.mode } : {},
        ),
      );
      output(
        opts,
        record,
        (r) =>
          `${name} is hibernated (${r.hibernation}${r.hibernationBytes ? `, ${formatBytes(r.hibernationBytes)} on disk` : ""}); a request to ${r.computerServerUrl ?? "it"} or \`hangar vm resume ${name}\` wakes it.`,
      );
    });

  clientOptions(vm.command("resume <name>").description("Wake a hibernated desktop, as it was"))
    .option("--wait", "wait until its computer server answers")
    .option("--timeout <seconds>", "with --wait: give up after this long", waitSeconds, 120)
    .action(async (name, opts) => {
      const query = opts.wait ? `?wait=ready&timeout=${opts.timeout}` : "";
      const started = Date.now();
      const record = await withProgress(`Resuming ${name}`, () =>
        clientOf(opts).request<Json>("POST", `${vmPath(name)}/resume${query}`),
      );
      output(
        opts,
        record,
        (r) => `${name} resumed in ${((Date.now() - started) / 1000).toFixed(1)} s: ${r.computerServerUrl}`,
      );
    });
}

function mode(value: string): string {
  if (!MODES.includes(value)) throw new InvalidArgumentError(`expected one of ${MODES.join(", ")}`);
  return value;
}
