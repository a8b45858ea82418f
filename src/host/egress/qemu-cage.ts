/**
 * The cage of a QEMU desktop (docs/egress.md): its user-mode network is `restrict=on` (the guest
 * reaches nothing outside but what is forwarded to it), and four forwards lead from the guest's
 * 10.0.2.100 to its gate on the host's loopback: 3128 (the proxy), 80 (HTTP by name), 443 (TLS by
 * name) and 53 (DNS over TCP). User-mode networking carries TCP only to forwards (and its DHCP
 * still names its own 10.0.2.3, which answers nothing once restricted), so the guest asks its gate
 * over TCP: `nameserver 10.0.2.100` and `options use-vc` in /etc/resolv.conf (glibc).
 *
 * Each forwarded connection is relayed by `socat` (a Debian package) to the gate's port: QEMU runs
 * it once per connection (`guestfwd=…-cmd:`), so connections are many at once. The gate's ports
 * are written beside the VM (`egress-gate.json`) so that a restarted service opens the same ones
 * for a VM that kept running. `{"egress": "allow"}` is everything through the proxy: the network
 * stays restricted for the VM's life.
 */
import { execFileSync } from "node:child_process";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { HostError } from "../errors.js";
import type { HostLog } from "../host-log.js";
import type { FwCfgItem } from "../qemu/args.js";
import { Cage } from "./cage.js";
import type { EgressService } from "./egress-service.js";
import type { NetworkPolicy } from "./policy.js";
import type { Gate, GatePorts } from "./proxy.js";

/** Where the guest reaches its gate. */
export const GUEST_GATE_ADDRESS = "10.0.2.100";
const GUEST_PORTS: GatePorts = { proxy: 3128, http: 80, tls: 443, dns: 53 };
const GATE_FILE = "egress-gate.json";

export class QemuCage extends Cage {
  private readonly gates = new Map<string, Gate>();
  private socat?: string | null;

  constructor(
    egress: EgressService,
    private readonly log: HostLog,
  ) {
    super("qemu", egress);
  }

  check(_policy: NetworkPolicy) {
    if (!this.socatPath()) {
      throw new HostError(
        "not_supported",
        "Network policies for QEMU desktops need socat on the host (Debian: socat): it relays the VM's connections to its egress gate",
      );
    }
  }

  /** Nothing beyond the proxy: the VM's network is restricted whatever its policy says. */
  async apply() {}

  proxyAddress(desktop: string): string | null {
    return this.egress.stored(desktop) ? `${GUEST_GATE_ADDRESS}:${GUEST_PORTS.proxy}` : null;
  }

  /**
   * What the VM's `-netdev user` gets besides its forwarded ports, its gate opened first (with the
   * ports it had, when the VM runs on from before a restart); nothing for a VM on the open network.
   */
  async netdevOptions(desktop: string, vmDir: string): Promise<string[]> {
    if (!this.egress.stored(desktop)) return [];
    const gate = await this.openGate(desktop, vmDir);
    const socat = this.socatPath();
    if (!socat)
      throw new HostError("not_supported", "socat is gone from the host: the caged VM cannot start");
    const forward = (guestPort: number, hostPort: number) =>
      // A value of -netdev: commas doubled; socat's address holds none.
      `guestfwd=tcp:${GUEST_GATE_ADDRESS}:${guestPort}-cmd:${socat} - TCP:127.0.0.1:${hostPort}`;
    return [
      "restrict=on",
      forward(GUEST_PORTS.proxy, gate.ports.proxy),
      forward(GUEST_PORTS.http, gate.ports.http),
      forward(GUEST_PORTS.tls, gate.ports.tls),
      forward(GUEST_PORTS.dns, gate.ports.dns),
    ];
  }

  /**
   * What the guest learns of its cage through fw_cfg: the gate's address (`opt/hangar/egress-gate`:
   * the guest image then asks it for names over TCP) and the desktop's CA (`opt/hangar/egress-ca`:
   * the guest image trusts it, for the domains the gate adds credentials to). Nothing for a VM on
   * the open network.
   */
  async firmwareConfig(desktop: string): Promise<FwCfgItem[]> {
    if (!this.egress.stored(desktop)) return [];
    const ca = await this.egress.caOf(desktop);
    return [
      { name: "opt/hangar/egress-gate", string: GUEST_GATE_ADDRESS },
      { name: "opt/hangar/egress-ca", file: ca.cert },
    ];
  }

  /** A VM that runs on after a restart of the service: its gate, on the ports its QEMU forwards to. */
  async recover(desktop: string, vmDir: string) {
    if (!this.egress.stored(desktop)) return;
    await this.openGate(desktop, vmDir).catch((err: Error) =>
      this.log.error("Cannot open the egress gate of a running VM", { vm: desktop, error: err.message }),
    );
  }

  async remove(desktop: string, vmDir?: string) {
    await this.gates.get(desktop)?.close();
    this.gates.delete(desktop);
    if (vmDir) await rm(join(vmDir, GATE_FILE), { force: true });
    await this.egress.forget(desktop);
  }

  async close() {
    await Promise.all([...this.gates.values()].map((gate) => gate.close()));
    this.gates.clear();
  }

  private async openGate(desktop: string, vmDir: string): Promise<Gate> {
    const open = this.gates.get(desktop);
    if (open) return open;
    const file = join(vmDir, GATE_FILE);
    const kept = await readFile(file, "utf8").then(
      (text) => JSON.parse(text) as GatePorts,
      () => undefined,
    );
    const where = { host: "127.0.0.1", answer: GUEST_GATE_ADDRESS };
    let gate: Gate;
    try {
      gate = await this.egress.proxy.open(desktop, {
        ...where,
        ports: kept ?? { proxy: 0, http: 0, tls: 0, dns: 0 },
      });
    } catch (err) {
      if (!kept) throw err;
      // The kept ports are taken (the VM is not running on them any more): new ones.
      gate = await this.egress.proxy.open(desktop, {
        ...where,
        ports: { proxy: 0, http: 0, tls: 0, dns: 0 },
      });
    }
    await writeFile(file, JSON.stringify(gate.ports));
    this.gates.set(desktop, gate);
    return gate;
  }

  private socatPath(): string | null {
    if (this.socat === undefined) {
      try {
        this.socat = execFileSync("sh", ["-c", "command -v socat"], { encoding: "utf8" }).trim() || null;
      } catch {
        this.socat = null;
      }
    }
    return this.socat;
  }
}
