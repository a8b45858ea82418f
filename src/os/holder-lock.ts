/**
 * A lock that dies with its holder: this process listens on a Unix socket named by a random id
 * (in Linux's abstract namespace, elsewhere a socket file in the temp directory). The kernel
 * closes it when the process ends, however it ends (kill -9 included), so another process can tell
 * a live holder from a dead one by connecting, where a pid test is fooled by zombies and reused ids.
 */
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { connect, createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ID = /^[0-9a-f]{16}$/;
let held: Promise<string> | undefined;

function socketPath(id: string): string {
  return process.platform === "linux" ? `\0hangar-holder-${id}` : join(tmpdir(), `hangar-holder-${id}.sock`);
}

/** This process's holder id: the first call starts listening, later calls reuse it. */
export function holderId(): Promise<string> {
  held ??= new Promise<string>((resolve, reject) => {
    const id = randomBytes(8).toString("hex");
    const server: Server = createServer((socket) => socket.destroy());
    server.once("error", reject);
    server.listen(socketPath(id), () => {
      server.unref();
      if (process.platform !== "linux") process.once("exit", () => rmSync(socketPath(id), { force: true }));
      resolve(id);
    });
  });
  return held;
}

/** True when the process holding `id` is alive (it accepts a connection); false once it ended. */
export function holderAlive(id: string): Promise<boolean> {
  if (!ID.test(id)) return Promise.resolve(false);
  return new Promise((resolve) => {
    const socket = connect(socketPath(id));
    const done = (alive: boolean) => {
      socket.destroy();
      resolve(alive);
    };
    socket.once("connect", () => done(true));
    socket.once("error", (err: NodeJS.ErrnoException) =>
      done(err.code !== "ECONNREFUSED" && err.code !== "ENOENT"),
    );
    socket.setTimeout(2000, () => done(true)); // a busy holder is still a holder
  });
}

/** Removes the socket file a dead holder left (a no-op on Linux, whose abstract names leave none). */
export function forgetHolder(id: string) {
  if (process.platform !== "linux" && ID.test(id)) rmSync(socketPath(id), { force: true });
}
