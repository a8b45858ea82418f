/**
 * The host's side of a caged container network, set with `ip`, `iptables` and `ip6tables`
 * (iproute2 and iptables, both Debian packages): the network's bridge with the gateway address the
 * desktop's gate listens on, and a filter so that what comes in on that bridge reaches the gate's
 * ports and nothing else of the host, and is never forwarded anywhere.
 *
 * Each command is run without a shell, its arguments checked names and addresses; a rule is added
 * only when `-C` says it is not there yet, so `allowGate` can be repeated at every start.
 */
import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import { promisify } from "node:util";
import { HostError } from "../errors.js";

const run = promisify(execFile);

const BRIDGE = /^[A-Za-z0-9_.-]{1,15}$/;

async function command(file: string, args: string[]): Promise<string> {
  try {
    return (await run(file, args, { timeout: 20_000 })).stdout;
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === "ENOENT") {
      throw new HostError(
        "not_supported",
        `Caging a desktop's network needs '${file}' on the host (Debian: iproute2, iptables)`,
      );
    }
    throw new HostError("failed", `${file} ${args.join(" ")} failed: ${(e.stderr || e.message).trim()}`);
  }
}

/** The bridge exists, is up and holds `gateway/prefix` (made so before the engine attaches to it). */
export async function ensureBridge(bridge: string, gateway: string, prefix: number) {
  if (!BRIDGE.test(bridge) || isIP(gateway) !== 4 || !(prefix >= 8 && prefix <= 30)) {
    throw new HostError("failed", `Not a bridge and address to set up: ${bridge} ${gateway}/${prefix}`);
  }
  const shown = await command("ip", ["-o", "-4", "addr", "show", "dev", bridge]).catch(() => undefined);
  if (shown === undefined) await command("ip", ["link", "add", bridge, "type", "bridge"]);
  if (!shown?.includes(` ${gateway}/`))
    await command("ip", ["addr", "replace", `${gateway}/${prefix}`, "dev", bridge]);
  await command("ip", ["link", "set", bridge, "up"]);
  // Ports published on 127.0.0.1 reach the container through this bridge (the engine's DNAT).
  const sysctl = `/proc/sys/net/ipv4/conf/${bridge}/route_localnet`;
  if ((await readFile(sysctl, "utf8").catch(() => "")).trim() !== "1") await writeFile(sysctl, "1");
}

/** The filter rules of a caged bridge, in the order they apply. */
function rules(
  bridge: string,
  gateway: string,
  tcpPorts: number[],
): { tool: string; chain: string; spec: string[] }[] {
  const from = ["-i", bridge];
  return [
    // Answers to what the host opened (the readiness probe, published ports).
    {
      tool: "iptables",
      chain: "INPUT",
      spec: [...from, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
    },
    {
      tool: "iptables",
      chain: "INPUT",
      spec: [
        ...from,
        "-d",
        gateway,
        "-p",
        "tcp",
        "-m",
        "multiport",
        "--dports",
        tcpPorts.join(","),
        "-j",
        "ACCEPT",
      ],
    },
    {
      tool: "iptables",
      chain: "INPUT",
      spec: [...from, "-d", gateway, "-p", "udp", "--dport", "53", "-j", "ACCEPT"],
    },
    { tool: "iptables", chain: "INPUT", spec: [...from, "-j", "REJECT"] },
    { tool: "iptables", chain: "FORWARD", spec: [...from, "-j", "DROP"] },
    { tool: "ip6tables", chain: "INPUT", spec: [...from, "-j", "REJECT"] },
    { tool: "ip6tables", chain: "FORWARD", spec: [...from, "-j", "DROP"] },
  ];
}

/** Lets the bridge's traffic reach the gate's ports on `gateway` and nothing else of the host or beyond. */
export async function allowGateOnly(bridge: string, gateway: string, tcpPorts: number[]) {
  const list = rules(bridge, gateway, tcpPorts);
  // Inserted at the top in reverse, so that they end up in order ahead of any other rule.
  for (const rule of [...list].reverse()) {
    const present = await command(rule.tool, ["-w", "-C", rule.chain, ...rule.spec]).then(
      () => true,
      () => false,
    );
    if (!present) await command(rule.tool, ["-w", "-I", rule.chain, "1", ...rule.spec]);
  }
}

/** Removes the bridge's rules (and the bridge, when the engine left it). */
export async function forgetBridge(bridge: string, gateway: string, tcpPorts: number[]) {
  if (!BRIDGE.test(bridge)) return;
  for (const rule of rules(bridge, gateway, tcpPorts)) {
    for (;;) {
      const removed = await command(rule.tool, ["-w", "-D", rule.chain, ...rule.spec]).then(
        () => true,
        () => false,
      );
      if (!removed) break;
    }
  }
  // The engine's CNI firewall leaves its isolation rules for the bridge behind (podman 4 with CNI).
  for (const chain of ["CNI-ISOLATION-STAGE-1", "CNI-ISOLATION-STAGE-2"]) {
    const listed = await command("iptables", ["-w", "-S", chain]).catch(() => "");
    const numbers = listed
      .split("\n")
      .filter((line) => line.startsWith("-A "))
      .map((line, i) => (line.split(/\s+/).includes(bridge) ? i + 1 : 0))
      .filter((n) => n > 0)
      .reverse();
    for (const n of numbers) await command("iptables", ["-w", "-D", chain, String(n)]).catch(() => undefined);
  }
  await command("ip", ["link", "del", bridge]).catch(() => undefined);
}
