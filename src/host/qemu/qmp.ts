/**
 * A small client for QEMU's machine protocol (QMP) over the VM's Unix socket: connect, negotiate
 * capabilities, then `execute(command, arguments)`. Replies come back in order; events are ignored.
 */
import { connect, type Socket } from "node:net";

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
}

export class QmpClient {
  private buffer = "";
  private pending: Pending[] = [];
  private closed = false;

  private constructor(private readonly socket: Socket) {
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => this.onData(chunk));
    socket.on("close", () => this.fail(new Error("QMP connection closed")));
    socket.on("error", (err) => this.fail(err));
  }

  /** Connects and negotiates; fails after `timeoutMs`. */
  static async connect(path: string, timeoutMs = 3000): Promise<QmpClient> {
    const socket = connect(path);
    const client = new QmpClient(socket);
    const timer = setTimeout(
      () => socket.destroy(new Error(`QMP did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    try {
      // The greeting arrives first; it is consumed as the reply of a pseudo command.
      await new Promise<unknown>((resolve, reject) => {
        client.pending.push({ resolve, reject });
      });
      await client.execute("qmp_capabilities");
      return client;
    } catch (err) {
      socket.destroy();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  execute<T = unknown>(command: string, args?: Record<string, unknown>, timeoutMs = 5000): Promise<T> {
    if (this.closed) return Promise.reject(new Error("QMP connection closed"));
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`QMP ${command} timed out`)), timeoutMs);
      this.pending.push({
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.socket.write(
        `${JSON.stringify(args ? { execute: command, arguments: args } : { execute: command })}\n`,
      );
    });
  }

  close() {
    this.closed = true;
    this.socket.destroy();
  }

  private onData(chunk: string) {
    this.buffer += chunk;
    let newline = this.buffer.indexOf("\n");
    while (newline >= 0) {
      const line = this.buffer.slice(0, newline).trim();
      this.buffer = this.buffer.slice(newline + 1);
      newline = this.buffer.indexOf("\n");
      if (!line) continue;
      let message: { event?: string; error?: { desc?: string }; return?: unknown; QMP?: unknown };
      try {
        message = JSON.parse(line);
      } catch {
        continue;
      }
      if ("event" in message) continue;
      const waiter = this.pending.shift();
      if (!waiter) continue;
      if ("error" in message) waiter.reject(new Error(`QMP: ${message.error?.desc ?? "error"}`));
      else waiter.resolve(message.return ?? message.QMP);
    }
  }

  private fail(err: Error) {
    this.closed = true;
    for (const waiter of this.pending.splice(0)) waiter.reject(err);
  }
}
