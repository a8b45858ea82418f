/**
 * Each running VM gets a loopback address of its own, `127.0.1.N`, so that every VM's computer
 * server is at `http://127.0.1.N:8000` and its SSH at port 22 of the same address. The lowest N
 * that no other VM holds and whose ports are free on the host is chosen. When a port is held on
 * every address (a host service listening on 0.0.0.0:22, say), the next candidate port is used.
 * Another `127.A.B` can be given (a second host service on the machine, each test's service).
 */
import { readFile } from "node:fs/promises";
import { canListen } from "../../common/listen.js";

const FIRST = 2; // 127.0.1.1 is the host name's address on Debian
const LAST = 254;
export const DEFAULT_LOOPBACK_NETWORK = "127.0.1";

/** Undefined for a `127.A.B` with A and B from 0 to 255, else what was expected instead. */
export function loopbackNetworkProblem(network: string): string | undefined {
  const parts = /^127\.(\d{1,3})\.(\d{1,3})$/.exec(network);
  if (!parts || Number(parts[1]) > 255 || Number(parts[2]) > 255) {
    return "expected 127.A.B (VMs then get 127.A.B.2–254)";
  }
  return undefined;
}

export interface Forwarding {
  ipAddress: string;
  /** Guest port → host port on `ipAddress`. */
  ports: Record<string, number>;
}

/**
 * @param candidates guest port → host ports to try, preferred first
 * @param network the `127.A.B` the address is chosen in (checked by the runtime when it starts)
 */
export async function pickForwarding(
  taken: Set<string>,
  candidates: Record<string, number[]>,
  network = DEFAULT_LOOPBACK_NETWORK,
): Promise<Forwarding> {
  const free: string[] = [];
  for (let n = FIRST; n <= LAST; n++) {
    const address = `${network}.${n}`;
    if (taken.has(address)) continue;
    free.push(address);
    const preferred = Object.fromEntries(
      Object.entries(candidates).map(([guest, ports]) => [guest, ports[0]]),
    );
    if (await allFree(address, Object.values(preferred))) return { ipAddress: address, ports: preferred };
    if (free.length >= 4) break; // the preferred ports are likely held on every address
  }
  for (const address of free) {
    const ports: Record<string, number> = {};
    for (const [guest, options] of Object.entries(candidates)) {
      for (const port of options) {
        if (await canListen(address, port)) {
          ports[guest] = port;
          break;
        }
      }
    }
    if (Object.keys(ports).length === Object.keys(candidates).length) return { ipAddress: address, ports };
  }
  throw new Error(`No free loopback address with free ports in ${network}.2–${network}.254 for another VM`);
}

async function allFree(address: string, ports: number[]) {
  for (const port of ports) if (!(await canListen(address, port))) return false;
  return true;
}

/** The host ports tried for the guest's SSH: 22 when this process may bind it, then 2222, 10022. */
export async function sshCandidates(): Promise<number[]> {
  const start = Number(
    (await readFile("/proc/sys/net/ipv4/ip_unprivileged_port_start", "utf8").catch(() => "1024")).trim(),
  );
  const privileged = process.getuid?.() === 0 || start <= 22;
  return privileged ? [22, 2222, 10022] : [2222, 10022];
}
