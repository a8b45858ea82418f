/**
 * Whether a guest's SSH server answers, without making anyone wait for it. A read answers from the
 * last probe (null before the first one ends) and, when that is older than `maxAgeMs`, starts a new
 * probe in the background: one at a time per address. QEMU's user-mode network accepts every
 * forwarded connection itself, so only the server's banner proves the guest is listening.
 */
import { connect } from "node:net";

interface Probe {
  available: boolean | null;
  checkedAt: number;
  running: boolean;
}

export class SshProbe {
  private readonly probes = new Map<string, Probe>();

  constructor(private readonly options: { maxAgeMs?: number; timeoutMs?: number } = {}) {}

  /** The cached answer for `host:port` (null: not known yet); refreshes it in the background when old. */
  available(host: string, port: number): boolean | null {
    const key = `${host}:${port}`;
    let probe = this.probes.get(key);
    if (!probe) {
      probe = { available: null, checkedAt: 0, running: false };
      this.probes.set(key, probe);
    }
    if (!probe.running && Date.now() - probe.checkedAt > (this.options.maxAgeMs ?? 5000)) {
      const current = probe;
      current.running = true;
      void speaksSsh(host, port, this.options.timeoutMs ?? 1000).then((available) => {
        Object.assign(current, { available, checkedAt: Date.now(), running: false });
      });
    }
    return probe.available;
  }
}

function speaksSsh(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (result: boolean) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("data", (chunk) => done(chunk.toString("latin1").startsWith("SSH-")));
    socket.once("error", () => done(false));
    socket.once("close", () => done(false));
  });
}
