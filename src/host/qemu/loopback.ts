/**
 * Each running VM gets a loopback address of its own, `127.0.1.N`, so that every VM's computer
 * server is at `http://127.0.1.N:8000` and its SSH at port 22 of the same address. The lowest N
 * that no other VM holds and whose ports are free on the host is chosen.
 */
import { readFile } from "node:fs/promises";
import { createServer } from "node:net";

const FIRST = 2; // 127.0.1.1 is the host name's address on Debian
const LAST = 254;

export async function pickLoopbackAddress(taken: Set<string>, ports: number[]): Promise<string> {
  for (let n = FIRST; n <= LAST; n++) {
    const address = `127.0.1.${n}`;
    if (taken.has(address)) continue;
    if (await allFree(address, ports)) return address;
  }
  throw new Error("No free loopback address in 127.0.1.2–127.0.1.254 for another VM");
}

async function allFree(address: string, ports: number[]) {
  for (const port of ports) if (!(await canListen(address, port))) return false;
  return true;
}

function canListen(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen({ host: address, port, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** Guest 22 goes to host port 22 when this process may bind it, else to 2222. */
export async function sshHostPort(): Promise<number> {
  if (process.getuid?.() === 0) return 22;

  const start = Number(
    (await readFile("/proc/sys/net/ipv4/ip_unprivileged_port_start", "utf8").catch(() => "1024")).trim(),
  );
  return start <= 22 ? 22 : 2222;
}
