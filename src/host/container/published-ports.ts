/**
 * The loopback ports a container desktop's ports are published on, chosen by the host service.
 *
 * Left to the engine, a published port is one the kernel hands out (port 0), from the ephemeral
 * range, and rootful podman holds it only while the container runs (conmon binds it; CNI's portmap
 * DNAT rule sends its traffic to the container). Between the container's making and its start, or
 * while it sleeps on disk, the kernel may give the same port to any other program's listener, and
 * once the container runs that listener's clients reach the container instead. Ports chosen here
 * come from a range outside the ephemeral one (default 20000–29999), which the kernel never hands
 * out; each is free on loopback when chosen and held by no container the engine knows.
 */
import { randomInt } from "node:crypto";
import { readFile } from "node:fs/promises";
import { canListen } from "../../common/listen.js";

export interface PortRange {
  first: number;
  last: number;
}

export const DEFAULT_PUBLISHED_PORTS: PortRange = { first: 20000, last: 29999 };

/** `FIRST-LAST` (1024 < FIRST ≤ LAST ≤ 65535, at least 16 ports) as a range, or what was wrong with it. */
export function parsePortRange(text: string): PortRange | string {
  const match = /^(\d{1,5})-(\d{1,5})$/.exec(text.trim());
  if (!match) return "expected FIRST-LAST, e.g. 20000-29999";
  const range = { first: Number(match[1]), last: Number(match[2]) };
  if (range.first <= 1024 || range.last > 65535) return "ports must be from 1025 to 65535";
  if (range.last - range.first < 15) return "expected a range of at least 16 ports";
  return range;
}

/** The kernel's ephemeral range (`ip_local_port_range`), Linux's default when it cannot be read. */
export async function ephemeralRange(): Promise<PortRange> {
  const text = await readFile("/proc/sys/net/ipv4/ip_local_port_range", "utf8").catch(() => "32768 60999");
  const [first, last] = text.trim().split(/\s+/).map(Number);
  return Number.isInteger(first) && Number.isInteger(last) ? { first, last } : { first: 32768, last: 60999 };
}

export class PublishedPorts {
  private cursor: number;
  private usable?: Promise<number[]>;

  /** `held()` gives the host ports the engine's containers publish (running or not). */
  constructor(
    private readonly range: PortRange,
    private readonly held: () => Promise<Set<number>>,
    private readonly address = "127.0.0.1",
  ) {
    // Each service starts at a place of its own, so that two services on a machine seldom meet.
    this.cursor = randomInt(range.last - range.first + 1);
  }

  /**
   * `count` ports, each free on loopback now and held by no container. They are handed out in turn
   * around the range, so that a port comes back only after the whole range was handed out.
   */
  async pick(count: number): Promise<number[]> {
    this.usable ??= this.usablePorts();
    const usable = await this.usable;
    const held = await this.held();
    const picked: number[] = [];
    for (let tried = 0; tried < usable.length && picked.length < count; tried++) {
      const port = usable[this.cursor++ % usable.length];
      if (!held.has(port) && (await canListen(this.address, port))) picked.push(port);
    }
    if (picked.length < count) {
      throw new Error(
        `No ${count} free loopback ports left in ${this.range.first}–${this.range.last} for a container desktop`,
      );
    }
    return picked;
  }

  /** The range less the kernel's ephemeral ports. */
  private async usablePorts(): Promise<number[]> {
    const ephemeral = await ephemeralRange();
    const ports: number[] = [];
    for (let port = this.range.first; port <= this.range.last; port++) {
      if (port < ephemeral.first || port > ephemeral.last) ports.push(port);
    }
    if (ports.length < 16) {
      throw new Error(
        `The container ports ${this.range.first}–${this.range.last} lie within the kernel's ephemeral ports ` +
          `(${ephemeral.first}–${ephemeral.last}): choose a range outside them`,
      );
    }
    return ports;
  }
}
