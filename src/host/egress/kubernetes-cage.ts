/**
 * The cage of a Kubernetes desktop (docs/egress.md): its gate listens at an address of the host
 * service that the cluster's Pods reach (`--egress-gate`), on ports of its own, and takes
 * connections from that desktop's Pod IP alone. The Pod is forced through it by an init container
 * of the desktop's image that sets the Pod's own filter (its network namespace is the Pod's, so
 * the rules hold for every container in it) before the desktop starts: DNS, HTTP and HTTPS are
 * sent to the gate's ports whatever address they were meant for, the gate's ports are allowed,
 * and nothing else leaves the Pod (TCP is reset, the rest refused). The desktop's container has no
 * capability to change them. This needs no NetworkPolicy, so it holds on any CNI; it needs a
 * cluster that admits one init container with `NET_ADMIN` (as service meshes' init containers do).
 *
 * The Pod's DNS is the gate (`dnsPolicy: None`), and the proxy is in its environment. The gate's
 * ports are written on the Pod (an annotation) so that a restarted service opens the same ones for
 * a Pod that kept running.
 *
 * Credential rules need the desktop to trust the gate's CA, in a Pod whose root is read-only and
 * that runs without root: the init container, as root, also copies the image's /etc/ssl/certs with
 * the CA added (to the bundle, and by its hash) into a volume that the desktop's container has at
 * /etc/ssl/certs, and puts the CA's certificate where the entrypoint adds it to the user's NSS
 * database (EGRESS_CA_IN_DESKTOP) and Node takes it (NODE_EXTRA_CA_CERTS).
 */

import { readFile } from "node:fs/promises";
import { isIP } from "node:net";
import { dirname } from "node:path";
import type { V1Container, V1EnvVar, V1PodDNSConfig, V1Volume, V1VolumeMount } from "@kubernetes/client-node";
import { EGRESS_CA_IN_DESKTOP } from "../../common/egress-trust.js";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import { Cage } from "./cage.js";
import type { EgressService } from "./egress-service.js";
import type { NetworkPolicy } from "./policy.js";
import type { Gate, GatePorts } from "./proxy.js";

/** The Pod's annotation that keeps its gate's ports. */
export const GATE_ANNOTATION = "hangar.dev/egress-gate";
const ANY_PORTS: GatePorts = { proxy: 0, http: 0, tls: 0, dns: 0 };

/** What a caged desktop's Pod is made with. */
export interface PodCage {
  initContainer: V1Container;
  env: V1EnvVar[];
  dnsConfig: V1PodDNSConfig;
  annotations: Record<string, string>;
  /** The trust the init container writes, and where the desktop's container has it. */
  volumes: V1Volume[];
  volumeMounts: V1VolumeMount[];
}

/** The volume the init container writes the desktop's trust into. */
const TRUST_VOLUME = "egress-trust";
/** Where the init container has it. */
const TRUST_DIR = "/hangar-trust";

export class KubernetesCage extends Cage {
  private readonly gates = new Map<string, Gate>();

  constructor(
    egress: EgressService,
    private readonly log: HostLog,
    /** Where the Pods reach the host service (`--egress-gate`); without it nothing is caged. */
    private readonly gateAddress: string | undefined,
    /** The desktop's Pod IP now (the gate takes connections from it alone). */
    private readonly podIp: (desktop: string) => Promise<string | undefined>,
  ) {
    super("kubernetes", egress);
  }

  /** Whether desktops can be caged here (a gate address was given). */
  get gated(): boolean {
    return this.gateAddress !== undefined;
  }

  check(_policy: NetworkPolicy) {
    if (!this.gateAddress) {
      throw new HostError(
        "not_supported",
        "Network policies for Kubernetes desktops need an egress gate the Pods reach: start the host service with " +
          "--egress-gate ADDRESS (an address of this host on the Pods' network)",
      );
    }
  }

  /** Nothing beyond the gate: the Pod reaches nothing else whatever the policy says. */
  async apply() {}

  proxyAddress(desktop: string): string | null {
    const gate = this.gates.get(desktop);
    return gate ? `${gate.host}:${gate.ports.proxy}` : null;
  }

  /**
   * The desktop's gate (opened on `kept` ports when a running Pod was made with them), and what its
   * new Pod is made with.
   */
  async podSettings(desktop: string, kept?: GatePorts): Promise<PodCage> {
    const gate = await this.openGate(desktop, kept);
    const { host, ports } = gate;
    const proxy = `http://${host}:${ports.proxy}`;
    const noProxy = "localhost,127.0.0.1,::1";
    const ca = await readFile((await this.egress.caOf(desktop)).cert, "utf8");
    return {
      initContainer: {
        name: "egress-cage",
        command: ["/bin/sh", "-c", `${cageScript(host, ports)}\n${TRUST_SCRIPT}`],
        // The CA's certificate (public; its key stays on the host).
        env: [{ name: "HANGAR_EGRESS_CA", value: ca }],
        volumeMounts: [{ name: TRUST_VOLUME, mountPath: TRUST_DIR }],
        securityContext: {
          runAsUser: 0,
          runAsGroup: 0,
          runAsNonRoot: false,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"], add: ["NET_ADMIN"] },
        },
        resources: { requests: { cpu: "10m", memory: "16Mi" }, limits: { cpu: "200m", memory: "64Mi" } },
      },
      env: [
        { name: "http_proxy", value: proxy },
        { name: "https_proxy", value: proxy },
        { name: "HTTP_PROXY", value: proxy },
        { name: "HTTPS_PROXY", value: proxy },
        { name: "no_proxy", value: noProxy },
        { name: "NO_PROXY", value: noProxy },
        { name: "NODE_EXTRA_CA_CERTS", value: EGRESS_CA_IN_DESKTOP },
      ],
      volumes: [{ name: TRUST_VOLUME, emptyDir: { medium: "Memory", sizeLimit: "4Mi" } }],
      volumeMounts: [
        { name: TRUST_VOLUME, mountPath: "/etc/ssl/certs", subPath: "certs", readOnly: true },
        { name: TRUST_VOLUME, mountPath: dirname(EGRESS_CA_IN_DESKTOP), subPath: "egress", readOnly: true },
      ],
      dnsConfig: { nameservers: [host], searches: [], options: [{ name: "ndots", value: "1" }] },
      annotations: { [GATE_ANNOTATION]: JSON.stringify(ports) },
    };
  }

  /** A Pod that runs on after a restart of the service: its gate, on the ports its filter sends to. */
  async recover(desktop: string, annotation: string | undefined) {
    if (!annotation) return;
    if (!this.caged(desktop) || !this.gateAddress) return;
    await this.openGate(desktop, keptPorts(annotation)).catch((err: Error) =>
      this.log.error("Cannot open the egress gate of a running Pod", { vm: desktop, error: err.message }),
    );
  }

  /** The desktop's Pod is gone: so is its gate. */
  async closeGate(desktop: string) {
    await this.gates.get(desktop)?.close();
    this.gates.delete(desktop);
  }

  /** The desktop is deleted: its gate and its policy go. */
  async remove(desktop: string) {
    await this.closeGate(desktop);
    await this.egress.forget(desktop);
  }

  async close() {
    await Promise.all([...this.gates.values()].map((gate) => gate.close()));
    this.gates.clear();
  }

  private async openGate(desktop: string, kept?: GatePorts): Promise<Gate> {
    const open = this.gates.get(desktop);
    if (open) return open;
    const host = this.gateAddress;
    if (!host)
      throw new HostError("not_supported", `${desktop} is caged, and this host service has no --egress-gate`);
    const where = {
      host,
      answer: host,
      admit: async (address: string) => address === (await this.podIp(desktop)),
    };
    let gate: Gate;
    try {
      gate = await this.egress.proxy.open(desktop, { ...where, ports: kept ?? ANY_PORTS });
    } catch (err) {
      if (!kept) throw gateError(err, host);
      // The kept ports are taken (the Pod is not running on them any more): new ones.
      gate = await this.egress.proxy.open(desktop, { ...where, ports: ANY_PORTS }).catch((e: unknown) => {
        throw gateError(e, host);
      });
    }
    this.gates.set(desktop, gate);
    return gate;
  }
}

/** The ports a Pod's annotation keeps, or undefined when it has none (or not these four). */
export function keptPorts(annotation: string | undefined): GatePorts | undefined {
  if (!annotation) return undefined;
  try {
    const ports = JSON.parse(annotation) as Record<string, unknown>;
    const valid = (["proxy", "http", "tls", "dns"] as const).every(
      (key) => Number.isInteger(ports[key]) && (ports[key] as number) > 0 && (ports[key] as number) < 65536,
    );
    return valid ? (ports as unknown as GatePorts) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The Pod's filter, as `iptables-restore` input (Debian's iptables in the image): DNS, HTTP and
 * HTTPS to anywhere but loopback are sent to the gate's ports; loopback, answers to connections
 * made to the Pod, and the gate's ports are let out; TCP to anything else is reset, the rest
 * refused. IPv6 gets no way out at all (when the Pod has IPv6).
 */
export function cageScript(gate: string, ports: GatePorts): string {
  if (isIP(gate) !== 4)
    throw new HostError("invalid_params", `The egress gate must be an IPv4 address, not '${gate}'`);
  const to = (port: number) => `-j DNAT --to-destination ${gate}:${port}`;
  const v4 = [
    "*nat",
    ":PREROUTING ACCEPT [0:0]",
    ":INPUT ACCEPT [0:0]",
    ":OUTPUT ACCEPT [0:0]",
    ":POSTROUTING ACCEPT [0:0]",
    `-A OUTPUT ! -d 127.0.0.0/8 -p udp --dport 53 ${to(ports.dns)}`,
    `-A OUTPUT ! -d 127.0.0.0/8 -p tcp --dport 53 ${to(ports.dns)}`,
    `-A OUTPUT ! -d 127.0.0.0/8 -p tcp --dport 80 ${to(ports.http)}`,
    `-A OUTPUT ! -d 127.0.0.0/8 -p tcp --dport 443 ${to(ports.tls)}`,
    "COMMIT",
    ...filterTable([
      ...[ports.proxy, ports.http, ports.tls, ports.dns].map(
        (port) => `-A OUTPUT -d ${gate}/32 -p tcp --dport ${port} -j ACCEPT`,
      ),
      `-A OUTPUT -d ${gate}/32 -p udp --dport ${ports.dns} -j ACCEPT`,
    ]),
  ];
  const v6 = filterTable([]);
  return [
    "set -e",
    "command -v iptables-restore >/dev/null || { echo 'iptables is not in the image (Debian: iptables): the desktop cannot be caged' >&2; exit 3; }",
    `printf '%s\\n' ${v4.map(quote).join(" ")} | iptables-restore`,
    // A Pod without IPv6 has nothing to close there.
    `if [ -e /proc/net/if_inet6 ]; then printf '%s\\n' ${v6.map(quote).join(" ")} | ip6tables-restore; fi`,
    "echo 'egress cage set'",
  ].join("\n");
}

/**
 * The desktop's trust, written by the init container (root, the desktop's image): the image's
 * /etc/ssl/certs with the CA added to the bundle and by its hash (OpenSSL's lookup by directory),
 * and the CA's certificate alone.
 */
const TRUST_SCRIPT = [
  `mkdir -p ${TRUST_DIR}/certs ${TRUST_DIR}/egress`,
  `cp -P -R /etc/ssl/certs/. ${TRUST_DIR}/certs/`,
  `printf '%s\\n' "$HANGAR_EGRESS_CA" > ${TRUST_DIR}/egress/ca.crt`,
  `cp ${TRUST_DIR}/egress/ca.crt ${TRUST_DIR}/certs/hangar-egress.pem`,
  `cat ${TRUST_DIR}/egress/ca.crt >> ${TRUST_DIR}/certs/ca-certificates.crt`,
  `if command -v openssl >/dev/null; then ln -sf hangar-egress.pem "${TRUST_DIR}/certs/$(openssl x509 -hash -noout -in ${TRUST_DIR}/egress/ca.crt).0"; fi`,
  `chmod -R a+rX ${TRUST_DIR}`,
  "echo 'egress CA trusted'",
].join("\n");

/** The filter table: loopback, answers, what `allowed` lets out, and nothing else. */
function filterTable(allowed: string[]): string[] {
  return [
    "*filter",
    ":INPUT ACCEPT [0:0]",
    ":FORWARD DROP [0:0]",
    ":OUTPUT DROP [0:0]",
    "-A OUTPUT -o lo -j ACCEPT",
    "-A OUTPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
    ...allowed,
    "-A OUTPUT -p tcp -j REJECT --reject-with tcp-reset",
    "-A OUTPUT -j REJECT",
    "COMMIT",
  ];
}

function quote(line: string): string {
  return `'${line.replaceAll("'", "'\\''")}'`;
}

function gateError(err: unknown, host: string): HostError {
  const code = (err as NodeJS.ErrnoException).code;
  return new HostError(
    "failed",
    `Cannot open the egress gate at ${host} (${code ?? (err as Error).message}): --egress-gate must be an address of this host that the Pods reach`,
  );
}
