/**
 * The cage of a container desktop (docs/egress.md): a network of its own that the engine makes
 * `internal` (no route out of it), whose bridge the host gives the gateway address; the desktop's
 * gate listens there (proxy 3128, HTTP 80, TLS 443, DNS 53), and the host's filter (host-net.ts)
 * lets nothing else in from that bridge nor forwards anything from it. The container is made with
 * that network alone, the gateway as its DNS server, the proxy in its environment
 * (`http_proxy`…, for programs that use one) and without CAP_NET_RAW.
 *
 * `{"egress": "allow"}` is the open network: the container is attached to the engine's default
 * network as well (a route out), and detached again when the policy restricts once more.
 * Needs a rootful engine on this host (its bridges are the host's) and root for the service.
 */
import { createHash } from "node:crypto";
import { isIP } from "node:net";
import type { ContainerCreateOptions } from "dockerode";
import { EGRESS_CA_IN_DESKTOP, TRUST_IN_NSS } from "../../common/egress-trust.js";
import { DESKTOP_USER, runsHangarEntrypoint } from "../container/desktop-image.js";
import { type Engine, engineError, statusOf } from "../container/engine.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { Cage } from "./cage.js";
import type { EgressService } from "./egress-service.js";
import { allowGateOnly, ensureBridge, forgetBridge } from "./host-net.js";
import type { NetworkPolicy } from "./policy.js";
import type { Gate, GatePorts } from "./proxy.js";

/** The gate's ports on the gateway: the usual ones, so that names resolved to it just work. */
export const CONTAINER_GATE_PORTS: GatePorts = { proxy: 3128, http: 80, tls: 443, dns: 53 };
const NETWORK_PREFIX = "hangar-egress-";
/** Installs the CA in the system's store (as root in the container). */
const INSTALL_SYSTEM = `cp ${EGRESS_CA_IN_DESKTOP} /usr/local/share/ca-certificates/hangar-egress.crt && update-ca-certificates >/dev/null`;
const LABEL_DESKTOP = "dev.hangar.egress-desktop";
interface CageNetwork {
  name: string;
  bridge: string;
  gateway: string;
  prefix: number;
}

export class ContainerCage extends Cage {
  private readonly gates = new Map<string, Gate>();
  private readonly gateways = new Map<string, string>();
  private openNetwork?: Promise<string>;

  constructor(
    private readonly engine: Engine,
    egress: EgressService,
    private readonly log: HostLog,
  ) {
    super("container", egress);
  }

  check(_policy: NetworkPolicy) {
    if (typeof process.getuid === "function" && process.getuid() !== 0) {
      throw new HostError(
        "not_supported",
        "Network policies for container desktops need the host service to run as root with a rootful engine " +
          "(the cage is a bridge of the host's with its own filter rules)",
      );
    }
  }

  /**
   * What a caged desktop's container is made with (its network made first, kept if there); nothing
   * for a desktop on the open network.
   */
  async containerSettings(desktop: string): Promise<{
    Env: string[];
    Binds: string[];
    HostConfig?: ContainerCreateOptions["HostConfig"];
  }> {
    if (!this.caged(desktop)) return { Env: [], Binds: [] };
    const network = await this.network(desktop, true);
    const ca = await this.egress.caOf(desktop);
    const proxy = `http://${network.gateway}:${CONTAINER_GATE_PORTS.proxy}`;
    const noProxy = "localhost,127.0.0.1,::1";
    return {
      Env: [
        `http_proxy=${proxy}`,
        `https_proxy=${proxy}`,
        `HTTP_PROXY=${proxy}`,
        `HTTPS_PROXY=${proxy}`,
        `no_proxy=${noProxy}`,
        `NO_PROXY=${noProxy}`,
        // Node does not read the system's store: the desktop's egress CA is added for it.
        `NODE_EXTRA_CA_CERTS=${EGRESS_CA_IN_DESKTOP}`,
      ],
      // The CA's certificate alone (its key stays on the host), installed in the trust stores at start.
      Binds: [`${ca.cert}:${EGRESS_CA_IN_DESKTOP}:ro`],
      HostConfig: {
        NetworkMode: network.name,
        Dns: [network.gateway],
        CapDrop: ["NET_RAW"],
      },
    };
  }

  /** Before the container starts: the bridge, its filter and the gate; the open network as the policy says. */
  async beforeStart(desktop: string) {
    if (!this.caged(desktop)) return;
    const network = await this.network(desktop, false);
    await ensureBridge(network.bridge, network.gateway, network.prefix);
    await allowGateOnly(network.bridge, network.gateway, gateTcpPorts());
    if (!this.gates.has(desktop)) {
      const gate = await this.egress.proxy.open(desktop, {
        host: network.gateway,
        ports: CONTAINER_GATE_PORTS,
        answer: network.gateway,
      });
      this.gates.set(desktop, gate);
    }
    await this.apply(desktop, this.egress.policyOf(desktop).policy);
  }

  /**
   * Once the container runs: its egress CA in the system's store (root) and in the desktop user's
   * NSS database, so that the proxy's certificates for credential domains are trusted there (the
   * project's image's entrypoint has done the second already; another image's has not).
   */
  async afterStart(desktop: string) {
    if (!this.caged(desktop)) return;
    const container = this.engine.docker.getContainer(`hangar-${desktop}`);
    const info = await container.inspect();
    const configured = info.Config.User || "0";
    // Hangar's image as root: its desktop user's database is the one Chromium reads.
    const user = configured === "0" && runsHangarEntrypoint(info.Config) ? DESKTOP_USER : configured;
    for (const [as, script] of [
      ["0", INSTALL_SYSTEM],
      [user, TRUST_IN_NSS],
    ] as const) {
      const outcome = await execIn(container, as, script).catch((err: Error) => ({
        code: -1,
        output: err.message,
      }));
      if (outcome.code !== 0) {
        await this.log.error("Cannot install the egress CA in the desktop", {
          vm: desktop,
          user: as,
          error: outcome.output.trim().slice(0, 300),
        });
      }
    }
  }

  async apply(desktop: string, policy: NetworkPolicy) {
    const container = `hangar-${desktop}`;
    const open = await this.openNetworkName();
    let attached: boolean;
    try {
      const info = await this.engine.docker.getContainer(container).inspect();
      attached = Object.keys(info.NetworkSettings?.Networks ?? {}).includes(open);
    } catch (err) {
      if (statusOf(err) === 404) return; // not made yet: made on its cage network alone
      throw engineError(err, this.engine, `Looking at the networks of ${desktop}`);
    }
    const wanted = policy.egress === "allow";
    if (wanted === attached) return;
    const network = this.engine.docker.getNetwork(open);
    try {
      if (wanted) await network.connect({ Container: container });
      else await network.disconnect({ Container: container, Force: true });
    } catch (err) {
      throw engineError(err, this.engine, `${wanted ? "Opening" : "Closing"} the network of ${desktop}`);
    }
  }

  proxyAddress(desktop: string): string | null {
    const gateway = this.gateways.get(desktop);
    return gateway ? `${gateway}:${CONTAINER_GATE_PORTS.proxy}` : null;
  }

  /** The desktop is gone: its gate, filter, bridge and network go, and its policy. */
  async remove(desktop: string) {
    await this.gates.get(desktop)?.close();
    this.gates.delete(desktop);
    const name = networkName(desktop);
    const info = await this.inspectNetwork(name);
    if (info) {
      await this.engine.docker
        .getNetwork(name)
        .remove()
        .catch((err: unknown) => {
          if (statusOf(err) !== 404)
            throw engineError(err, this.engine, `Removing the network of ${desktop}`);
        });
      const network = describeNetwork(name, info);
      if (network) await forgetBridge(network.bridge, network.gateway, gateTcpPorts());
    }
    this.gateways.delete(desktop);
    await this.egress.forget(desktop);
  }

  /** After a restart of the service: the gates of caged desktops that run are opened again. */
  async recover(running: string[]) {
    for (const desktop of running) {
      await this.beforeStart(desktop).catch((err: Error) =>
        this.log.error("Cannot open the egress gate of a running desktop", {
          vm: desktop,
          error: err.message,
        }),
      );
    }
  }

  async close() {
    await Promise.all([...this.gates.values()].map((gate) => gate.close()));
    this.gates.clear();
  }

  // ---- the engine's networks ----

  private async network(desktop: string, make: boolean): Promise<CageNetwork> {
    const name = networkName(desktop);
    let info = await this.inspectNetwork(name);
    if (!info && make) {
      try {
        await this.engine.docker.createNetwork({
          Name: name,
          Driver: "bridge",
          Internal: true,
          Labels: { [LABEL_DESKTOP]: desktop },
          Options: { "com.docker.network.bridge.name": bridgeName(desktop) },
        });
      } catch (err) {
        if (statusOf(err) !== 409) throw engineError(err, this.engine, `Making the network of ${desktop}`);
      }
      info = await this.inspectNetwork(name);
    }
    const network = info && describeNetwork(name, info);
    if (!network) {
      throw new HostError(
        "failed",
        `The egress network of ${desktop} (${name}) is missing or has no IPv4 subnet: delete the desktop and make it again`,
      );
    }
    this.gateways.set(desktop, network.gateway);
    return network;
  }

  private async inspectNetwork(name: string): Promise<NetworkInfo | undefined> {
    try {
      return (await this.engine.docker.getNetwork(name).inspect()) as NetworkInfo;
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw engineError(err, this.engine, `Looking for network ${name}`);
    }
  }

  /** The engine's default network (podman's `podman`, Docker's `bridge`): the open one. */
  private openNetworkName(): Promise<string> {
    this.openNetwork ??= this.engine.docker.listNetworks().then(
      (networks) => (networks.some((n) => n.Name === "podman") ? "podman" : "bridge"),
      (err: unknown) => {
        this.openNetwork = undefined;
        throw engineError(err, this.engine, "Listing the engine's networks");
      },
    );
    return this.openNetwork;
  }
}

/** Runs `sh -c script` in the container as `user`; its exit code and output. */
async function execIn(
  container: ReturnType<Engine["docker"]["getContainer"]>,
  user: string,
  script: string,
): Promise<{ code: number; output: string }> {
  const exec = await container.exec({
    Cmd: ["sh", "-c", script],
    User: user,
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = await exec.start({ hijack: true, stdin: false });
  let output = "";
  await new Promise<void>((resolve, reject) => {
    stream.on("data", (chunk: Buffer) => {
      output = (output + chunk.toString("latin1")).slice(-4000);
    });
    stream.once("end", resolve);
    stream.once("close", resolve);
    stream.once("error", reject);
    setTimeout(() => reject(new Error("the install did not end within 60 s")), 60_000).unref();
  });
  const { ExitCode } = await exec.inspect();
  // The engine frames the output in 8-byte headers: only its printable characters are kept.
  const text = [...output].filter((ch) => ch >= " " || ch === "\n" || ch === "\t").join("");
  return { code: ExitCode ?? -1, output: text };
}

interface NetworkInfo {
  Options?: Record<string, string>;
  IPAM?: { Config?: { Subnet?: string; Gateway?: string }[] };
}

function networkName(desktop: string) {
  return `${NETWORK_PREFIX}${desktop}`;
}

/** `hgr` and 12 hex digits of the desktop's name: a bridge name fits in 15 characters. */
function bridgeName(desktop: string) {
  return `hgr${createHash("sha256").update(desktop).digest("hex").slice(0, 12)}`;
}

function gateTcpPorts() {
  return [
    CONTAINER_GATE_PORTS.proxy,
    CONTAINER_GATE_PORTS.http,
    CONTAINER_GATE_PORTS.tls,
    CONTAINER_GATE_PORTS.dns,
  ];
}

/** The network's bridge, gateway (the engine's, or the subnet's first address) and prefix. */
function describeNetwork(name: string, info: NetworkInfo): CageNetwork | undefined {
  const config = info.IPAM?.Config?.find((c) => c.Subnet && isIP(c.Subnet.split("/")[0]) === 4);
  if (!config?.Subnet) return undefined;
  const [base, prefixText] = config.Subnet.split("/");
  const prefix = Number(prefixText);
  let gateway = config.Gateway && isIP(config.Gateway) === 4 ? config.Gateway : undefined;
  if (!gateway) {
    const parts = base.split(".").map(Number);
    const n = ((parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]) >>> 0;
    const first = n + 1;
    gateway = [first >>> 24, (first >>> 16) & 255, (first >>> 8) & 255, first & 255].join(".");
  }
  const desktop = name.slice(NETWORK_PREFIX.length);
  return {
    name,
    bridge: info.Options?.["com.docker.network.bridge.name"] ?? bridgeName(desktop),
    gateway,
    prefix,
  };
}
